import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { after, before, test } from 'node:test';
import { Agent } from 'undici';
import { Cancel, providerCall } from './provider-call.js';

const CHUNK = Buffer.alloc(64 * 1024, 'a');
const CHUNKS = 80; // 5 MiB, far past every buffer on the way
let server: Server;
let url: string;
let agent: Agent;
/** Whether the last streamed answer ended because its client went away. */
let cutShort: Promise<boolean>;

before(async () => {
  server = createServer((req, res) => {
    if (req.url === '/error') {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(Buffer.alloc(200 * 1024, 'e'));
      return;
    }
    cutShort = new Promise((resolve) => {
      res.on('close', () => resolve(!res.writableFinished));
    });
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    let i = 0;
    const more = () => {
      while (i < CHUNKS) {
        i++;
        if (!res.write(CHUNK)) return void res.once('drain', more);
      }
      res.end();
    };
    more();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  agent = new Agent();
});
after(async () => {
  await agent.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const call = (path: string, signal = new Cancel()) =>
  providerCall(agent, {
    url: `${url}${path}`,
    method: 'GET',
    headers: {},
    signal,
    headersTimeout: 10_000,
    bodyTimeout: 10_000,
  });

test('a streamed answer read slower than it is sent arrives whole: the provider is paused, then resumed', async () => {
  const a = await call('/stream');
  assert.equal(a.statusCode, 200);
  assert.equal(a.headers['content-type'], 'text/event-stream');
  let n = 0;
  let bad = false;
  const slow = new Writable({
    highWaterMark: 1024,
    write(chunk: Buffer, _enc, cb) {
      n += chunk.length;
      if (chunk.some((b) => b !== 0x61)) bad = true;
      setImmediate(cb);
    },
  });
  await pipeline(a.body.stream(), slow);
  assert.equal(n, CHUNK.length * CHUNKS);
  assert.equal(bad, false);
  assert.equal(await cutShort, false);
});

test('a stream its reader destroys stops the provider’s answer', async () => {
  const a = await call('/stream');
  const s = a.body.stream();
  await new Promise((r) => s.once('data', r));
  s.destroy();
  assert.equal(await cutShort, true, 'the provider saw its client leave');
});

test('the caller leaving before the answer cancels the call', async () => {
  const signal = new Cancel();
  const a = await call('/stream', signal);
  const whole = a.body.whole();
  signal.abort();
  await assert.rejects(whole);
  assert.equal(await cutShort, true);
});

test('an error answer is read to its end and kept to its first bytes', async () => {
  const a = await call('/error');
  assert.equal(a.statusCode, 500);
  const text = await a.body.head(64 * 1024);
  assert.equal(text.length, 64 * 1024);
  // The connection was read to its end: the next call on the same agent goes through.
  assert.equal((await call('/error')).statusCode, 500);
});
