// A sandbox whose API daemon the out-of-memory killer ended (here by the daemon's own writes: an upload larger than
// the sandbox's memory, which its writable layer is charged to) is reported, not left DEPLOYED answering 502: it
// turns FAILED with an event that says what happened and with which figures, its address says so, and a spec
// update starts it again.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type SandboxServer, startSandboxServer, TEST_MEMORY_MB } from './support.js';

/** A multipart upload of `mb` MB of zeros, streamed (the daemon writes the file as it reads it). */
function zeros(mb: number, boundary: string): ReadableStream<Uint8Array> {
  const chunk = new Uint8Array(1024 * 1024);
  let sent = -1;
  return new ReadableStream({
    pull(c) {
      if (sent === -1)
        c.enqueue(
          new TextEncoder().encode(
            `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n` +
              'Content-Type: application/octet-stream\r\n\r\n',
          ),
        );
      else if (sent < mb) c.enqueue(chunk);
      else {
        c.enqueue(new TextEncoder().encode(`\r\n--${boundary}--\r\n`));
        c.close();
      }
      sent++;
    },
  });
}

describe('a sandbox out of memory', () => {
  let s: SandboxServer;
  before(async () => {
    s = await startSandboxServer();
  });
  after(() => s.close());

  it('turns FAILED with the figures when its daemon is ended, and starts again on a spec update', async () => {
    const created = await s.create('filled');
    const url = created.metadata.url;
    const boundary = 'berth-oom';
    const upload = await s
      .run(`${url}/filesystem/tmp/upload`, {
        method: 'PUT',
        headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
        body: zeros(2 * TEST_MEMORY_MB, boundary),
        duplex: 'half',
      } as RequestInit)
      .then(
        (r) => r.status,
        (e: Error) => e.message,
      );
    assert.notEqual(upload, 200, 'the daemon did not live to store the file');

    const failed = await s.waitFor('filled', (b) => b.status === 'FAILED', 'FAILED');
    const last = failed.events.at(-1);
    assert.equal(last.status, 'FAILED');
    assert.match(
      last.message,
      new RegExp(
        `^out of memory: the sandbox used all of its ${TEST_MEMORY_MB} MB and the kernel ended its processes ` +
          `\\(\\d+ killed\\), the sandbox's API daemon with them; its files took \\d+ MB of it`,
      ),
    );
    assert.equal(failed.state, undefined);
    const call = await s.run(`${url}/process`, { method: 'POST', json: { command: 'true' } });
    assert.equal(call.status, 503);
    assert.match((await call.json()).detail, /is failed: out of memory/);

    const put = await s.api('/sandboxes/filled', {
      method: 'PUT',
      json: {
        metadata: { name: 'filled' },
        spec: { ...failed.spec, runtime: { ...failed.spec.runtime, envs: [{ name: 'AGAIN', value: '1' }] } },
      },
    });
    assert.equal(put.status, 200, await put.text());
    await s.waitFor('filled', (b) => b.status === 'DEPLOYED', 'DEPLOYED');
    const again = await s.run(`${url}/process`, {
      method: 'POST',
      json: { command: 'ls /tmp', waitForCompletion: true },
    });
    assert.equal((await again.json()).stdout, '', 'a fresh sandbox');
  });
});
