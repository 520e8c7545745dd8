// The provider key never leaves Berth: not in answers (success, stream, error), not in the log, not in
// usage rows, not in the database in clear — even when the provider echoes it back in an error.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { connection, eventually, model, ok, PROVIDER_KEY, runUrl, startWorld, type World } from './setup.js';

const WRONG_KEY = 'sk-stored-but-wrong-5e4d3c2b1a09';
let w: World;
const seen: string[] = [];

before(async () => {
  w = await startWorld();
  await connection(w.server, 'good', 'openai', w.fake.url);
  await connection(w.server, 'bad', 'openai', w.fake.url, WRONG_KEY);
  await connection(w.server, 'claude-conn', 'anthropic', w.fake.url);
  await model(w.server, 'm', { integrationConnections: ['good'], runtime: { type: 'openai' } });
  await model(w.server, 'wrong', { integrationConnections: ['bad'], runtime: { type: 'openai' } });
  await model(w.server, 'c', {
    integrationConnections: ['claude-conn'],
    runtime: { type: 'anthropic', model: 'fake-claude' },
  });
});
after(() => w.close());

async function call(url: string, init: RequestInit & { json?: unknown } = {}) {
  const headers = new Headers(init.headers);
  headers.set('authorization', `Bearer ${w.server.adminKey}`);
  if (init.json !== undefined) headers.set('content-type', 'application/json');
  const r = await fetch(url, {
    ...init,
    headers,
    body: init.json === undefined ? init.body : JSON.stringify(init.json),
  });
  const text = await r.text();
  seen.push(`${r.status} ${url}\n${JSON.stringify([...r.headers])}\n${text}`);
  return { status: r.status, text };
}

test('the provider key appears nowhere a caller, an operator or the database can read it', async () => {
  const msgs = [{ role: 'user', content: 'Hi' }];
  assert.equal(
    (await call(`${runUrl(w.server, 'm')}/v1/chat/completions`, { method: 'POST', json: { messages: msgs } }))
      .status,
    200,
  );
  await call(`${runUrl(w.server, 'm')}/v1/chat/completions`, {
    method: 'POST',
    json: { messages: msgs, stream: true },
  });
  await call(`${runUrl(w.server, 'm')}/v1/embeddings`, { method: 'POST', json: { input: 'x' } });
  await call(`${runUrl(w.server, 'm')}/v1/models`);
  await call(`${runUrl(w.server, 'm')}/v1/chat/completions`, {
    method: 'POST',
    json: { messages: [{ role: 'user', content: '[status 400]' }] },
  });
  await call(`${runUrl(w.server, 'c')}/v1/chat/completions`, {
    method: 'POST',
    json: { messages: msgs, max_tokens: 3, stream: true },
  });
  await call(`${runUrl(w.server, 'c')}/v1/messages`, {
    method: 'POST',
    json: { messages: msgs, max_tokens: 3 },
  });

  // The provider refuses the stored key and echoes it in its message: Berth must not pass it on.
  const refused = await call(`${runUrl(w.server, 'wrong')}/v1/chat/completions`, {
    method: 'POST',
    json: { messages: msgs },
  });
  assert.equal(refused.status, 502);
  assert.match(refused.text, /the provider refused the credential stored in integration connection bad/);
  const listed = await call(`${w.server.url}/v0/integrations/connections/bad/models`);
  assert.equal(listed.status, 502);

  await call(`${w.server.url}/v0/integrations/connections/good/models`);
  await eventually(
    () => ok(w.server.api('/models/m/usage?groupBy=key')),
    (rows: any[]) => rows[0]?.requests >= 5,
    'usage recorded',
  );
  await call(`${w.server.url}/v0/models/m/usage?groupBy=key`);
  await call(`${w.server.url}/v0/models/wrong/usage?groupBy=hour`);
  await call(`${w.server.url}/metrics`);

  for (const s of seen) {
    assert.ok(!s.includes(PROVIDER_KEY), `an answer carries the provider key:\n${s.slice(0, 300)}`);
    assert.ok(!s.includes(WRONG_KEY), `an answer carries the stored key:\n${s.slice(0, 300)}`);
  }
  const logs = w.server.logs();
  assert.ok(logs.length > 0);
  assert.ok(!logs.includes(PROVIDER_KEY) && !logs.includes(WRONG_KEY), 'the log carries a provider key');
  for (const f of readdirSync(w.server.dataDir).filter((f) => f.startsWith('berth.db'))) {
    const bytes = readFileSync(join(w.server.dataDir, f));
    assert.ok(
      !bytes.includes(PROVIDER_KEY) && !bytes.includes(WRONG_KEY),
      `${f} holds a provider key in clear`,
    );
  }
  // The fake did get the real key: the swap happened.
  assert.ok(w.fake.requests.some((r) => r.headers.authorization === `Bearer ${PROVIDER_KEY}`));
  assert.ok(w.fake.requests.every((r) => !JSON.stringify(r.headers).includes(w.server.adminKey)));
});

test('each model call is one info line: model, status, tokens and duration, never the body or a key', async () => {
  const lines = () =>
    w.server
      .logs()
      .split('\n')
      .filter((l) => l.includes('"model call"'))
      .map((l) => JSON.parse(l));
  const before = lines().length;
  const secret = 'a prompt the log must not hold';
  const r = await call(`${runUrl(w.server, 'm')}/v1/chat/completions`, {
    method: 'POST',
    json: { messages: [{ role: 'user', content: secret }] },
  });
  assert.equal(r.status, 200);
  const added = await eventually(
    async () => lines().slice(before),
    (l: any[]) => l.length >= 1,
    'the call is logged',
  );
  assert.equal(added.length, 1);
  const line = added[0];
  assert.equal(line.level, 30);
  assert.equal(line.model, 'm');
  assert.equal(line.status, 200);
  assert.ok(line.inputTokens > 0 && line.outputTokens > 0, JSON.stringify(line));
  assert.equal(typeof line.durationMs, 'number');
  const text = JSON.stringify(line);
  for (const s of [secret, w.server.adminKey, PROVIDER_KEY]) assert.ok(!text.includes(s), text);
});
