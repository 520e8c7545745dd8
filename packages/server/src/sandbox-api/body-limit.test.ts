// The daemon refuses a body past its limit as soon as it knows, instead of reading (or waiting for) all of it.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startSandboxDaemon, type TestDaemon } from '../test-support/sandbox-daemon.js';
import { JSON_BODY_LIMIT } from './http.js';

/** A daemon that waits for the body instead of answering never closes: fail then rather than hang the run. */
const HANG_GUARD_MS = 60_000;

/** Resolves with everything the daemon sent once it closes the connection. */
function answer(sock: Socket): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    sock.setEncoding('utf8');
    sock.on('data', (d) => {
      text += d;
    });
    sock.on('error', () => undefined);
    sock.on('close', () => resolve(text));
  });
}

describe('sandbox daemon body limit', () => {
  let d: TestDaemon;
  before(async () => {
    d = await startSandboxDaemon();
  });
  after(() => d.close());

  const open = () => {
    const u = new URL(d.url);
    return connect(Number(u.port), u.hostname);
  };

  it('answers 413 to a declared length past the limit before any of the body is sent', {
    timeout: HANG_GUARD_MS,
  }, async () => {
    const sock = open();
    const got = answer(sock);
    sock.write(
      `POST /process HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${70 * 1024 * 1024}\r\n\r\n{"command":`,
    );
    // The body never comes: the answer must not wait for it.
    const text = await got;
    assert.match(text, /^HTTP\/1\.1 413 /);
    assert.match(text, /connection: close/i);
    assert.match(text, /larger than/);
  });

  it('answers 413 to a chunked body as soon as it passes the limit, without waiting for its end', {
    timeout: HANG_GUARD_MS,
  }, async () => {
    const sock = open();
    const got = answer(sock);
    sock.write(
      'POST /process HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n',
    );
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    const head = Buffer.from(`${chunk.length.toString(16)}\r\n`);
    for (let sent = 0; sent <= JSON_BODY_LIMIT; sent += chunk.length) {
      if (sock.destroyed) break;
      if (!sock.write(Buffer.concat([head, chunk, Buffer.from('\r\n')])))
        await new Promise((r) => sock.once('drain', r).once('close', r));
    }
    // No terminating chunk is ever sent.
    const text = await got;
    assert.match(text, /^HTTP\/1\.1 413 /);
  });

  it('still reads a body within the limit', async () => {
    const r = await d.fetch('/filesystem/tmp/small', { method: 'PUT', json: { content: 'x'.repeat(1000) } });
    assert.equal(r.status, 200);
  });
});
