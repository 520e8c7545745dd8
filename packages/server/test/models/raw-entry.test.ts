// The model gateway's entry on raw node:http (decision 052): what Fastify's router and body parser did for it
// before is done here, with the same answers: a body past the limit refused from its declared length before
// it is read, an undecodable path refused as bad input, the bare endpoint address pointing to a provider path.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, test } from 'node:test';
import { connection, model, runUrl, startWorld, type World } from './setup.js';

let w: World;

before(async () => {
  w = await startWorld();
  await connection(w.server, 'oa', 'openai', w.fake.url);
  await model(w.server, 'gpt', {
    integrationConnections: ['oa'],
    runtime: { type: 'openai', model: 'gpt-4o' },
  });
});
after(() => w.close());

/** A request whose headers say what they say (fetch would correct a Content-Length). */
function raw(
  path: string,
  headers: Record<string, string>,
  body = '',
): Promise<{ status: number; json: any }> {
  const u = new URL(runUrl(w.server, 'gpt'));
  return new Promise((resolve, reject) => {
    const req = request(
      { host: u.hostname, port: u.port, method: 'POST', path: `${u.pathname}${path}`, headers },
      (res) => {
        let text = '';
        res.on('data', (c) => {
          text += c;
        });
        res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    // The body is never sent whole: the answer must come from the declared length alone.
    req.write(body);
  });
}

test('a body declared larger than 32 MB is refused before it is read, in each API’s error shape', async () => {
  const sent = w.fake.requests.length;
  const big = {
    authorization: `Bearer ${w.server.adminKey}`,
    'content-type': 'application/json',
    'content-length': String(64 * 1024 * 1024),
  };
  const chat = await raw('/v1/chat/completions', big, '{"messages":');
  assert.equal(chat.status, 413);
  assert.equal(chat.json.error.code, 'PAYLOAD_TOO_LARGE');
  assert.match(chat.json.error.message, /larger than 33554432 bytes/);
  const messages = await raw('/v1/messages', big, '{"messages":');
  assert.equal(messages.status, 413);
  assert.equal(messages.json.type, 'error');
  assert.equal(messages.json.error.type, 'request_too_large');
  assert.equal(w.fake.requests.length, sent, 'the provider was never asked');
});

test('a path with an invalid percent-encoding is bad input, not a server error', async () => {
  const res = await fetch(`${runUrl(w.server, 'gpt')}/v1/chat%E0%A4%A/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${w.server.adminKey}`, 'content-type': 'application/json' },
    body: '{}',
  });
  assert.equal(res.status, 400);
  assert.match((await res.json()).error.message, /invalid percent-encoding/);
});

test('the endpoint’s bare address says which provider path to add', async () => {
  const res = await fetch(runUrl(w.server, 'gpt'), {
    method: 'POST',
    headers: { authorization: `Bearer ${w.server.adminKey}` },
  });
  assert.equal(res.status, 404);
  assert.match((await res.json()).error.message, /add the provider's path: .*\/v1\/chat\/completions/);
});
