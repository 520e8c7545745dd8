// A callback survives a kill -9 of the server: an execution's callback whose receiver answers 503 is pending with
// its retries when the server dies; the server started again on the same data dir delivers it, signed, with the
// same webhook-id as the attempts before the crash.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { serve, stopped } from '../serve-process.js';
import { removeAllSandboxes, startSandboxServer } from '../sandboxes/support.js';
import { api, deployJob, type Target, waitExecution } from './support.js';
import { removeDirLater } from '../../src/test-support/sandboxes.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a pending callback is delivered after a kill -9 and restart', { timeout: 300_000 }, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-cb-restart-'));
  const work = mkdtempSync(join(tmpdir(), 'berth-cb-restart-src-'));
  const got: { status: number; headers: IncomingHttpHeaders; body: string }[] = [];
  let up = false;
  const receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      const status = up ? 204 : 503;
      got.push({ status, headers: req.headers, body });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const callbackUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  const savedEnv = process.env.BERTH_CALLBACK_ALLOW_CIDRS;
  process.env.BERTH_CALLBACK_ALLOW_CIDRS = '127.0.0.1/32';
  let server: ChildProcess | undefined;
  try {
    // Built in-process on the same data dir, then served by `berth serve` (as the jobs restart test does).
    const builder = await startSandboxServer({}, dataDir);
    await deployJob(builder, join(work, 'job'), 'cb', { memory: 256, timeout: 120 });
    await builder.close();
    const first = await serve(dataDir);
    server = first.child;
    const adminKey = readFileSync(join(dataDir, 'admin.key'), 'utf8').trim();
    let s: Target = { url: first.url, adminKey, dataDir };
    const cur = await api(s, '/jobs/cb');
    const put = await api(s, '/jobs/cb', {
      method: 'PUT',
      json: {
        metadata: { name: 'cb' },
        spec: {
          ...cur.body.spec,
          triggers: [{ id: 'hook', type: 'http', configuration: { callbackUrl, retry: 20 } }],
        },
      },
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    for (let i = 0; i < 300 && (await api(s, '/jobs/cb')).body.status !== 'DEPLOYED'; i++) await sleep(100);
    const c = await api(s, '/jobs/cb/executions', { method: 'POST', json: { tasks: [{ name: 'x' }] } });
    assert.equal(c.status, 200, JSON.stringify(c.body));
    const id = c.body.executionId;
    assert.equal((await waitExecution(s, 'cb', id)).status, 'succeeded');
    for (let i = 0; i < 300 && got.length === 0; i++) await sleep(100);
    assert.ok(got.length > 0, 'the callback was tried before the crash');
    server.kill('SIGKILL');
    await stopped(server);
    const triedBefore = got.length;
    up = true;

    const second = await serve(dataDir);
    server = second.child;
    s = { ...s, url: second.url };
    for (let i = 0; i < 600 && !got.some((g) => g.status === 204); i++) await sleep(100);
    const delivered = got.find((g) => g.status === 204);
    assert.ok(delivered, `delivered after the restart (${got.length - triedBefore} attempts since)`);
    assert.equal(delivered.headers['webhook-id'], got[0].headers['webhook-id'], 'the same webhook-id');
    assert.equal(JSON.parse(delivered.body).executionId, id);
    const secret = (await api(s, '/jobs/cb?show_secrets=true')).body.spec.triggers[0].configuration
      .callbackSecret;
    const hook = new Webhook(secret);
    assert.doesNotThrow(() => hook.verify(delivered.body, delivered.headers as Record<string, string>));
    // Delivered once: nothing is sent again afterwards.
    const after = got.length;
    await sleep(2500);
    assert.equal(got.length, after, 'no attempt after the delivery');
  } finally {
    if (server) {
      server.kill('SIGKILL');
      await stopped(server);
    }
    if (savedEnv === undefined) delete process.env.BERTH_CALLBACK_ALLOW_CIDRS;
    else process.env.BERTH_CALLBACK_ALLOW_CIDRS = savedEnv;
    receiver.close();
    await removeAllSandboxes(dataDir);
    removeDirLater(dataDir);
    rmSync(work, { recursive: true, force: true });
  }
});
