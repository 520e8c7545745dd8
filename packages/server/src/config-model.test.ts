// The model gateway's server setting: the output a token budget reserves for a call without max_tokens.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from './config.js';

test('BERTH_MODEL_OUTPUT_ESTIMATE: absent leaves the gateway default; a non-positive integer fails start-up', () => {
  assert.equal(loadConfig({}, {}).modelOutputEstimate, undefined);
  assert.equal(loadConfig({}, { BERTH_MODEL_OUTPUT_ESTIMATE: '2048' }).modelOutputEstimate, 2048);
  for (const bad of ['0', '-5', '1.5', 'lots'])
    assert.throws(() => loadConfig({}, { BERTH_MODEL_OUTPUT_ESTIMATE: bad }), /BERTH_MODEL_OUTPUT_ESTIMATE/);
});
