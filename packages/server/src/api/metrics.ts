// Prometheus /metrics (prom-client): process metrics, request counts and latency per route, and (when the
// composition root passes a sampler) per-sandbox gauges read at scrape time (sandbox-metrics.ts). Series labelled
// with a workspace are shown as the scrape's credential allows (metrics-access.ts); without an access rule, none.
import type { FastifyInstance } from 'fastify';
import {
  Counter,
  collectDefaultMetrics,
  type Metric,
  type MetricObjectWithValues,
  type MetricValue,
  Registry,
} from 'prom-client';
import { PlainHistogram, type PlainSeries } from '../http/plain-histogram.js';
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
  // Counted and timed in plain numbers on each request, handed to the registry at scrape time: prom-client hashes a
  // child's labels on every inc and observe, which was 3 % of a GET (decision 066).
  const counts = new Map<string, { child: { inc(v: number): void }; n: number }>();
  const requests = new Counter({
    name: 'berth_http_requests_total',
    help: 'HTTP requests by method, route and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
    collect() {
      for (const c of counts.values())
        if (c.n) {
          c.child.inc(c.n);
          c.n = 0;
        }
    },
  });
  const latency = routeLatency();
  registry.registerMetric(latency as unknown as Metric);
  const series = new Map<string, PlainSeries>();
  app.addHook('onResponse', (req, reply, done) => {
    const route = req.routeOptions.url ?? 'unmatched';
    const rk = `${req.method} ${route}`;
    const ck = `${rk} ${reply.statusCode}`;
    let c = counts.get(ck);
    if (!c) {
      c = { child: requests.labels(req.method, route, String(reply.statusCode)), n: 0 };
      counts.set(ck, c);
    }
    c.n++;
    let l = series.get(rk);
    if (!l) {
      l = latency.child(rk, { method: req.method, route });
      series.set(rk, l);
    }
    l.observe(reply.elapsedTime / 1000);
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

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5];

/** berth_http_request_duration_seconds per method and route, in plain numbers (decision 066). */
export const routeLatency = () =>
  new PlainHistogram(
    'berth_http_request_duration_seconds',
    'HTTP request latency by method and route',
    LATENCY_BUCKETS,
  );
