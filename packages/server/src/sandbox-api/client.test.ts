// The daemon client against a daemon-shaped HTTP server on a unix socket: health, a JSON start and a refusal, a
// streamed exec, and the log stream's framing undone across any chunking.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DaemonClient, DaemonError, Unframer } from './client.js';

describe('the daemon client', () => {
  let dir: string;
  let server: Server;
  let daemon: DaemonClient;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-client-'));
    const socket = join(dir, 'd.sock');
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => {
        body += c;
      });
      req.on('end', () => {
        if (req.url === '/health') return res.end(JSON.stringify({ status: 'ok', activeKeepAlive: 2 }));
        const p = JSON.parse(body || '{}');
        if (!p.command) {
          res.statusCode = 400;
          return res.end(JSON.stringify({ error: 'command is required' }));
        }
        const done = { name: p.name, status: 'completed', exitCode: 0, logs: 'hi\n' };
        if (req.headers.accept !== 'application/x-ndjson') return res.end(JSON.stringify(done));
        res.write(`${JSON.stringify({ type: 'stdout', data: 'h' })}\n{"type":"std`);
        res.end(`out","data":"i\\n"}\n${JSON.stringify({ type: 'result', data: JSON.stringify(done) })}\n`);
      });
    });
    await new Promise<void>((r) => server.listen(socket, r));
    daemon = DaemonClient.at(socket);
  });
  after(() => {
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reads health and a started process; a refusal is a DaemonError with the status and body', async () => {
    assert.equal((await daemon.waitHealthy()).activeKeepAlive, 2);
    assert.equal((await daemon.start({ command: 'true', name: 'x' })).status, 'completed');
    const err = await daemon.start({ command: '' }).catch((e) => e);
    assert.ok(err instanceof DaemonError);
    assert.equal(err.status, 400);
    assert.deepEqual(err.body, { error: 'command is required' });
  });

  it('streams an exec: output as it comes, however the lines are cut, then the process', async () => {
    let out = '';
    const p = await daemon.exec({ command: 'echo hi' }, (_s, d) => {
      out += d;
    });
    assert.equal(out, 'hi\n');
    assert.equal(p.exitCode, 0);
  });

  it('removes stdout:/stderr: prefixes and keepalives however the log stream is cut', () => {
    const framed = 'stdout:one\n[keepalive]\nstderr:two\nstdout:par';
    const rest = 'tial line\nstdout:last\n';
    const whole = `${framed}${rest}`;
    for (let cut = 0; cut <= whole.length; cut++) {
      const u = new Unframer();
      const out = u.push(whole.slice(0, cut)) + u.push(whole.slice(cut)) + u.end();
      assert.equal(out, 'one\ntwo\npartial line\nlast\n', `cut at ${cut}`);
    }
  });
});
