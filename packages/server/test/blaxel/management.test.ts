// The unmodified @blaxel/core SDK, pointed at Berth, manages policies and integration connections (docs/compat.md).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { runBlaxelScript } from '../../src/test-support/blaxel.js';
import { startTestServer, type TestServer } from '../../src/test-support/server.js';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.close());

test('@blaxel/core creates, lists, gets and deletes policies and integration connections', async () => {
  const secret = 'sk-planted-blaxel-7f3a9c';
  const r = JSON.parse(
    await runBlaxelScript(join(import.meta.dirname, 'management-client.mjs'), server, {
      PLANTED_SECRET: secret,
    }),
  );
  assert.equal(r.createPolicy.status, 200, JSON.stringify(r.createPolicy.error));
  assert.equal(r.createPolicy.data.metadata.name, 'sdk-policy');
  assert.equal(r.createPolicy.data.spec.type, 'location');
  assert.equal(r.createPolicyAgain.status, 409);
  assert.equal(r.createPolicyAgain.error.code, 409);
  // The SDK sends Blaxel-Version 2026-04-28, so lists come as {data, meta} (decision 019).
  assert.ok(Array.isArray(r.listPolicies.data.data), JSON.stringify(r.listPolicies.data));
  assert.deepEqual(r.listPolicies.data.meta, { hasMore: false });
  assert.ok(r.listPolicies.data.data.some((p: any) => p.metadata.name === 'sdk-policy'));
  assert.equal(r.getPolicy.data.metadata.labels.team, 'a');
  assert.equal(
    r.createIntegrationConnection.status,
    200,
    JSON.stringify(r.createIntegrationConnection.error),
  );
  assert.ok(r.listIntegrationConnections.data.data.some((c: any) => c.metadata.name === 'sdk-conn'));
  assert.equal(r.getIntegrationConnection.data.spec.integration, 'openai');
  assert.notEqual(r.getIntegrationConnection.data.spec.secret.apiKey, secret);
  assert.ok(!JSON.stringify(r).includes(secret), 'the secret never comes back');
  assert.equal(r.deleteIntegrationConnection.status, 200);
  assert.equal(r.deletePolicy.status, 200);
  assert.equal(r.getPolicyAfterDelete.status, 404);
  assert.equal(r.getPolicyAfterDelete.error.code, 404);
});
