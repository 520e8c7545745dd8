import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { ModelMetrics } from './metrics.js';

test('counts kept in plain numbers reach the registry at each scrape, as prom-client would render them', async () => {
  const registry = new Registry();
  const m = new ModelMetrics(registry);
  const s = m.series('ws-a', 'gpt', 'ak-1');
  s.request('200');
  s.request('200');
  s.request('429');
  s.inputTokens.inc(7);
  s.outputTokens.inc(3);
  s.latency.observe(0.02);
  s.latency.observe(3);
  s.firstByte.observe(0.004);
  m.series('ws-b', 'gpt', 'ak-2').request('200');
  let text = await registry.metrics();
  assert.match(
    text,
    /berth_model_requests_total\{workspace="ws-a",model="gpt",key="ak-1",status="200"\} 2\n/,
  );
  assert.match(
    text,
    /berth_model_requests_total\{workspace="ws-a",model="gpt",key="ak-1",status="429"\} 1\n/,
  );
  assert.match(
    text,
    /berth_model_requests_total\{workspace="ws-b",model="gpt",key="ak-2",status="200"\} 1\n/,
  );
  assert.match(
    text,
    /berth_model_tokens_total\{workspace="ws-a",model="gpt",key="ak-1",direction="input"\} 7\n/,
  );
  assert.match(
    text,
    /berth_model_tokens_total\{workspace="ws-a",model="gpt",key="ak-1",direction="output"\} 3\n/,
  );
  assert.match(text, /# TYPE berth_model_request_duration_seconds histogram/);
  assert.match(
    text,
    /berth_model_request_duration_seconds_bucket\{le="0.01",workspace="ws-a",model="gpt"\} 0\n/,
  );
  assert.match(
    text,
    /berth_model_request_duration_seconds_bucket\{le="0.025",workspace="ws-a",model="gpt"\} 1\n/,
  );
  assert.match(
    text,
    /berth_model_request_duration_seconds_bucket\{le="5",workspace="ws-a",model="gpt"\} 2\n/,
  );
  assert.match(
    text,
    /berth_model_request_duration_seconds_bucket\{le="\+Inf",workspace="ws-a",model="gpt"\} 2\n/,
  );
  assert.match(text, /berth_model_request_duration_seconds_sum\{workspace="ws-a",model="gpt"\} 3.02\n/);
  assert.match(text, /berth_model_request_duration_seconds_count\{workspace="ws-a",model="gpt"\} 2\n/);
  assert.match(
    text,
    /berth_model_time_to_first_byte_seconds_bucket\{le="0.005",workspace="ws-a",model="gpt"\} 1\n/,
  );
  assert.doesNotMatch(text, /request_duration_seconds_count\{workspace="ws-b"/, 'no call of ws-b was timed');
  // A counter keeps its total across scrapes; what comes after adds to it.
  s.request('200');
  text = await registry.metrics();
  assert.match(
    text,
    /berth_model_requests_total\{workspace="ws-a",model="gpt",key="ak-1",status="200"\} 3\n/,
  );
  assert.match(
    text,
    /berth_model_requests_total\{workspace="ws-a",model="gpt",key="ak-1",status="429"\} 1\n/,
  );
});
