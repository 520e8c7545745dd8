// The model gateway remembers a resolved caller for a second (models/caller.ts); a key deleted, or its service
// account deleted, in that second must still be refused on the very next call.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { connection, model, ok, runUrl, startWorld, type World } from './setup.js';

let w: World;

before(async () => {
  w = await startWorld();
  await connection(w.server, 'oa', 'openai', w.fake.url);
  await model(w.server, 'm', {
    integrationConnections: ['oa'],
    runtime: { type: 'openai', model: 'fake-gpt' },
  });
});
after(() => w.close());

const chat = (key: string) =>
  fetch(`${runUrl(w.server, 'm')}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }] }),
  });

async function serviceAccountKey(name: string) {
  const sa = await ok(w.server.api('/service_accounts', { method: 'POST', json: { name } }));
  const k = await ok(
    w.server.api(`/service_accounts/${sa.client_id}/api_keys`, { method: 'POST', json: {} }),
  );
  return { clientId: sa.client_id as string, id: k.id as string, key: k.apiKey as string };
}

test('a deleted API key is refused on the next model call, though its caller was just resolved', async () => {
  const k = await serviceAccountKey('revoked-key');
  // Two calls: the second is answered from the cached caller.
  for (let i = 0; i < 2; i++) assert.equal((await chat(k.key)).status, 200);
  const d = await w.server.api(`/service_accounts/${k.clientId}/api_keys/${k.id}`, { method: 'DELETE' });
  assert.equal(d.status, 200);
  const r = await chat(k.key);
  assert.equal(r.status, 401);
  assert.equal((await r.json()).error.type, 'UNAUTHENTICATED');
});

test('a deleted service account is refused on the next model call', async () => {
  const k = await serviceAccountKey('revoked-account');
  for (let i = 0; i < 2; i++) assert.equal((await chat(k.key)).status, 200);
  assert.equal((await w.server.api(`/service_accounts/${k.clientId}`, { method: 'DELETE' })).status, 200);
  assert.equal((await chat(k.key)).status, 401);
});

test('a bad key is refused every time, also right after a good key of the same caller shape', async () => {
  assert.equal((await chat(w.server.adminKey)).status, 200);
  for (let i = 0; i < 2; i++) assert.equal((await chat(`${w.server.adminKey}x`)).status, 401);
});
