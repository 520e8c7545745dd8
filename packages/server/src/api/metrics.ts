// Prometheus /metrics (prom-client): process metrics, request counts and latency per route, and (when the
// composition root passes a sampler) per-sandbox gauges read at scrape time (sandbox-metrics.ts).
import type { FastifyInstance } from 'fastify';
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';
import { registerSandboxMetrics, type SandboxSampler } from './sandbox-metrics.js';

export function registerMetrics(
  app: FastifyInstance,
  registry = new Registry(),
  opts: { sandboxes?: SandboxSampler } = {},
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
  app.get('/metrics', async (_req, reply) => {
    await refreshSandboxes?.();
    reply.type(registry.contentType);
    return registry.metrics();
  });
  return registry;
}
