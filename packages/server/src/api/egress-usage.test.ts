// GET /v0/egressgateways/usage: gateway name → the workspace's sandboxes whose spec names it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startTestServer } from '../test-support/server.js';
import { usageOf } from './egress-usage.js';

test("usage lists each gateway's sandboxes; direct mode and sandboxes without a gateway are left out", () => {
  const box = (name: string, egress?: unknown) => ({ name, body: { spec: { network: { egress } } } });
  assert.deepEqual(
    usageOf([
      box('b', { gateway: 'office', mode: 'gateway' }),
      box('a', { gateway: 'office' }),
      box('c', { gateway: 'lab' }),
      box('d', { gateway: 'office', mode: 'direct' }),
      box('e'),
    ]),
    { office: ['a', 'b'], lab: ['c'] },
  );
});

test("GET /egressgateways/usage answers for the caller's workspace", async () => {
  const s = await startTestServer();
  try {
    assert.deepEqual(await (await s.api('/egressgateways/usage')).json(), {});
    // Disabled: the answer comes from the specs, no sandbox needs to run.
    const res = await s.api('/sandboxes', {
      method: 'POST',
      json: {
        metadata: { name: 'box' },
        spec: { enabled: false, network: { egress: { gateway: 'office' } } },
      },
    });
    assert.equal(res.status, 200, await res.text());
    assert.deepEqual(await (await s.api('/egressgateways/usage')).json(), { office: ['box'] });
  } finally {
    await s.close();
  }
});
