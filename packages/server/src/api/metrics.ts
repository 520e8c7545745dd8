// Prometheus /metrics (prom-client): process metrics, request counts and latency per route, and (when the
// composition root passes a sampler) per-sandbox gauges read at scrape time (sandbox-metrics.ts). Series labelled
// with a workspace are shown as the scrape's credential allows (metrics-access.ts); without an access rule, none.
import type { FastifyInstance } from 'fastify';
import {
  Counter,
  collectDefaultMetrics,
  Histogram,
  type Metric,
  type MetricObjectWithValues,
  type MetricValue,
  Registry,
} from 'prom-client';
import type { MetricsAccess, WorkspaceFilter } from './metrics-access.js';
import { registerSandboxMetrics, type SandboxSampler } from './sandbox-metrics.js';

/** What prom-client's registry holds and renders: each metric answers its values at scrape time. */
type Readable = { name: string; get(): Promise<MetricObjectWithValues<MetricValue<string>>> };

/**
 * The registry as one scrape may see it: every series without a workspace label, and those of the workspaces
 * `visible` allows. A registry of its own per scrape, whose metrics read the shared ones and drop what is not
 * visible, so the text is rendered by prom-client as for the whole registry.
 */
function scoped(registry: Registry, visible: WorkspaceFilter): Registry {
  const view = new Registry();
  for (const m of registry.getMetricsAsArray() as unknown as Readable[]) {
    const filtered: Readable = {
      name: m.name,
      get: async () => {
        const data = await m.get();
        const values = data.values.filter((v) => {
          const ws = v.labels?.workspace;
          return ws === undefined || visible(String(ws));
        });
        return { ...data, values };
      },
    };
    view.registerMetric(filtered as unknown as Metric);
  }
  return view;
}

export function registerMetrics(
  app: FastifyInstance,
  registry = new Registry(),
  opts: { sandboxes?: SandboxSampler; access?: MetricsAccess } = {},
) {
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: 'berth_http_requests_total',
    help: 'HTTP requests by method, route and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'berth_http_request_duration_seconds',
    help: 'HTTP request latency by method and route',
    labelNames: ['method', 'route'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
    registers: [registry],
  });
  // Label children are looked up once per (method, route, status): hashing label objects on every request was a
  // measurable share of a GET. Routes are the registered patterns, so the maps stay small.
  const counters = new Map<string, { inc(): void }>();
  const timers = new Map<string, { observe(v: number): void }>();
  app.addHook('onResponse', (req, reply, done) => {
    const route = req.routeOptions.url ?? 'unmatched';
    const rk = `${req.method} ${route}`;
    const ck = `${rk} ${reply.statusCode}`;
    let c = counters.get(ck);
    if (!c) {
      c = requests.labels(req.method, route, String(reply.statusCode));
      counters.set(ck, c);
    }
    c.inc();
    let t = timers.get(rk);
    if (!t) {
      t = latency.labels(req.method, route);
      timers.set(rk, t);
    }
    t.observe(reply.elapsedTime / 1000);
    done();
  });
  const refreshSandboxes = opts.sandboxes && registerSandboxMetrics(registry, opts.sandboxes);
  app.get('/metrics', async (req, reply) => {
    const visible = opts.access ? await opts.access(req.headers) : () => false;
    await refreshSandboxes?.();
    reply.type(registry.contentType);
    return scoped(registry, visible).metrics();
  });
  return registry;
}
