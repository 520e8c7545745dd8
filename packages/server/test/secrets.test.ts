// A planted secret never appears in responses, errors, logs or the database file; an admin asking show_secrets sees it.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { OUTBOUND_LOOPBACK, startTestServer, type TestServer } from '../src/test-support/server.js';

const SECRET = 'planted-secret-4d9b1e77c0a2';
let server: TestServer;
const seen: string[] = [];

before(async () => {
  // The planted connection names a provider on loopback.
  server = await startTestServer({ BERTH_LOG_LEVEL: 'debug', ...OUTBOUND_LOOPBACK });
});
after(() => server.close());

async function call(path: string, init?: Parameters<TestServer['api']>[1]) {
  const r = await server.api(path, init);
  const text = await r.text();
  seen.push(`${r.status} ${path}\n${JSON.stringify([...r.headers])}\n${text}`);
  return { status: r.status, body: text ? JSON.parse(text) : undefined };
}

test('secrets are sealed at rest and redacted everywhere unless an admin asks', async () => {
  const conn = await call('/integrations/connections', {
    method: 'POST',
    json: {
      metadata: { name: 'openai' },
      spec: { integration: 'openai', secret: { apiKey: SECRET }, config: { baseUrl: 'http://127.0.0.1:9' } },
    },
  });
  assert.equal(conn.status, 200);
  const agent = await call('/agents', {
    method: 'POST',
    json: {
      metadata: { name: 'a1' },
      spec: {
        runtime: {
          envs: [
            { name: 'TOKEN', value: SECRET, secret: true },
            { name: 'PLAIN', value: 'visible' },
          ],
        },
      },
    },
  });
  assert.equal(agent.status, 200);
  assert.equal(agent.body.spec.runtime.envs[1].value, 'visible');
  await call('/integrations/connections/openai');
  await call('/integrations/connections');
  await call('/agents/a1');
  // GET then PUT of the redacted object keeps the secret (the SDK's update pattern).
  const got = await call('/agents/a1');
  const put = await call('/agents/a1', {
    method: 'PUT',
    json: { ...got.body, metadata: { ...got.body.metadata, labels: { x: 'y' } } },
  });
  assert.equal(put.status, 200);
  // A rejected write that carries the secret must not echo it in the error.
  await call('/integrations/connections', {
    method: 'POST',
    json: { metadata: { name: 'Bad Name' }, spec: { integration: 'openai', secret: { k: SECRET } } },
  });
  await call('/agents', {
    method: 'POST',
    json: {
      metadata: { name: 'a2' },
      spec: { runtime: { envs: [{ name: 'bad name', value: SECRET, secret: true }] } },
    },
  });

  for (const s of seen) assert.ok(!s.includes(SECRET), `a response carries the secret:\n${s.slice(0, 400)}`);
  assert.ok(!server.logs().includes(SECRET), 'the log carries the secret');
  for (const f of readdirSync(server.dataDir).filter((f) => f.startsWith('berth.db'))) {
    assert.ok(!readFileSync(join(server.dataDir, f)).includes(SECRET), `${f} holds the secret in clear`);
  }

  const shown = await call('/integrations/connections/openai?show_secrets=true');
  assert.equal(shown.body.spec.secret.apiKey, SECRET);
  const shownAgent = await call('/agents/a1?show_secrets=true');
  assert.equal(shownAgent.body.spec.runtime.envs[0].value, SECRET, 'the secret survived GET then PUT');
});
