import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestServer, type TestServer } from '../test-support/server.js';

let s: TestServer;
before(async () => {
  s = await startTestServer();
});
after(() => s.close());

test('/metrics counts requests per method, route and status and times them per route', async () => {
  for (let i = 0; i < 3; i++) assert.equal((await s.api('/policies')).status, 200);
  assert.equal((await s.api('/policies/missing')).status, 404);
  const text = await (await fetch(`${s.url}/metrics`)).text();
  assert.match(text, /berth_http_requests_total\{method="GET",route="\/v0\/policies",status="200"\} 3/);
  assert.match(
    text,
    /berth_http_requests_total\{method="GET",route="\/v0\/policies\/:policyName",status="404"\} 1/,
  );
  assert.match(text, /berth_http_request_duration_seconds_count\{method="GET",route="\/v0\/policies"\} 3/);
  assert.match(text, /process_resident_memory_bytes/);
});
