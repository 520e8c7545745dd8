// The API's request counter and latency histogram are kept in plain numbers and handed to the registry at scrape
// time (decision 066): the scrape must read exactly what prom-client's own Histogram and Counter would.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import Fastify from 'fastify';
import { Histogram, type Metric, Registry } from 'prom-client';
import { registerMetrics, routeLatency } from './metrics.js';

test("the latency histogram renders as prom-client's Histogram fed the same observations", async () => {
  const ours = new Registry();
  const latency = routeLatency();
  ours.registerMetric(latency as unknown as Metric);
  const theirs = new Registry();
  const h = new Histogram({
    name: 'berth_http_request_duration_seconds',
    help: 'HTTP request latency by method and route',
    labelNames: ['method', 'route'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
    registers: [theirs],
  });
  const seen: [string, string, number][] = [
    ['GET', '/v0/policies', 0.0001],
    ['GET', '/v0/policies', 0.0005],
    ['GET', '/v0/policies', 0.003],
    ['PUT', '/v0/policies/:policyName', 0.2],
    ['PUT', '/v0/policies/:policyName', 7],
    ['GET', '/v0/policies', 1],
  ];
  for (const [method, route, v] of seen) {
    latency.child(`${method} ${route}`, { method, route }).observe(v);
    h.labels(method, route).observe(v);
  }
  // The scrape's text is the contract: the same lines in the same order.
  assert.equal(await ours.metrics(), await theirs.metrics());
});

test('requests are counted per method, route and status once each, however often the registry is read', async () => {
  const app = Fastify();
  const registry = new Registry();
  registerMetrics(app, registry);
  app.get('/v0/things/:name', async (req, reply) =>
    (req.params as { name: string }).name === 'missing' ? reply.code(404).send({}) : {},
  );
  for (let i = 0; i < 3; i++) await app.inject('/v0/things/a');
  await app.inject('/v0/things/missing');
  const first = await registry.metrics();
  assert.match(first, /berth_http_requests_total\{method="GET",route="\/v0\/things\/:name",status="200"\} 3/);
  assert.match(first, /berth_http_requests_total\{method="GET",route="\/v0\/things\/:name",status="404"\} 1/);
  assert.match(
    first,
    /berth_http_request_duration_seconds_count\{method="GET",route="\/v0\/things\/:name"\} 4/,
  );
  await app.inject('/v0/things/b');
  const second = await registry.metrics();
  assert.match(
    second,
    /berth_http_requests_total\{method="GET",route="\/v0\/things\/:name",status="200"\} 4/,
  );
  assert.match(
    second,
    /berth_http_request_duration_seconds_count\{method="GET",route="\/v0\/things\/:name"\} 5/,
  );
  await app.close();
});
