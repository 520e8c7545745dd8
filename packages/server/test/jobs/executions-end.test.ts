// How job executions end, on real sandboxes: the timeout kill, cancel leaving no process or sandbox behind (and
// `berth cancel` of an execution that had ended saying so), the signed callback of an HTTP-triggered execution, and
// the CLI's views of them (`berth get executions`, `berth logs job … | head`).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { verifyWebhookSignature } from '@blaxel/core';
import { Webhook } from 'standardwebhooks';
import { inspectingDriver, type SandboxServer, startSandboxServer } from '../sandboxes/support.js';
import { api, berth, deployJob, taskProcesses, waitExecution } from './support.js';

const JOB = 'batch';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('how job executions end', () => {
  let s: SandboxServer;
  let work: string;
  before(async () => {
    // Callbacks to private addresses are refused unless opened: the test's receiver listens on loopback.
    s = await startSandboxServer({ BERTH_CALLBACK_ALLOW_CIDRS: '127.0.0.1/32' });
    work = mkdtempSync(join(tmpdir(), 'berth-jobs-'));
    await deployJob(s, join(work, 'job'), JOB, {
      memory: 256,
      maxConcurrentTasks: 5,
      maxRetries: 2,
      timeout: 120,
    });
  });
  after(async () => {
    await s.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('kills a task at its timeout and marks it so; the execution fails', async () => {
    // A short limit for this execution only (an execution takes the job's settings when it is created).
    const setTimeoutS = async (timeout: number) => {
      const cur = await api(s, `/jobs/${JOB}?show_secrets=true`);
      const spec = { ...cur.body.spec, runtime: { ...cur.body.spec.runtime, timeout } };
      const put = await api(s, `/jobs/${JOB}`, { method: 'PUT', json: { metadata: { name: JOB }, spec } });
      assert.equal(put.status, 200, JSON.stringify(put.body));
    };
    await setTimeoutS(3);
    const c = await api(s, `/jobs/${JOB}/executions`, { method: 'POST', json: { tasks: [{ sleep: 60 }] } });
    await setTimeoutS(120);
    const id = c.body.executionId;
    const e = await waitExecution(s, JOB, id);
    assert.equal(e.status, 'failed');
    assert.equal(e.tasks[0].status, 'timeout');
    assert.equal(e.tasks[0].attempts, 3, 'a timed-out attempt is retried like a failed one');
    assert.match(JSON.stringify(e.tasks[0].conditions), /killed after 3s/);
    assert.deepEqual(taskProcesses(id), []);
  });

  it('cancel stops running tasks, cancels waiting ones and leaves no process or sandbox behind', async () => {
    const tasks = Array.from({ length: 10 }, () => ({ sleep: 2.5 }));
    const c = await api(s, `/jobs/${JOB}/executions`, { method: 'POST', json: { tasks } });
    const id = c.body.executionId;
    for (let i = 0; i < 300 && taskProcesses(id).length === 0; i++) await sleep(50);
    assert.ok(taskProcesses(id).length > 0, 'some tasks were running');
    const d = await api(s, `/jobs/${JOB}/executions/${id}`, { method: 'DELETE' });
    assert.equal(d.status, 200);
    assert.ok(['cancelling', 'cancelled'].includes(d.body.status), d.body.status);
    const e = await waitExecution(s, JOB, id);
    assert.equal(e.status, 'cancelled');
    assert.ok(e.stats.cancelled >= 5, JSON.stringify(e.stats));
    assert.deepEqual(taskProcesses(id), []);
    // An ended task's sandbox is removed in the background once its outcome is stored (decision 033): within
    // 5 s, before the cancel's own kill timer (CANCEL_KILL_MS, 7 s) would remove it anyway.
    let left: string[] = [];
    for (let i = 0; i < 50; i++) {
      const driver = await inspectingDriver(s.dataDir);
      left = (await driver.list()).filter((x) => x.id.startsWith('job-')).map((x) => x.id);
      await driver.close();
      if (!left.length) break;
      await sleep(100);
    }
    assert.deepEqual(left, [], 'no task sandbox is left');

    // Cancelling it again does nothing, and the CLI says so rather than print its status as if it had cancelled it.
    const again = await berth(s, ['cancel', 'execution', JOB, id]);
    assert.equal(again.code, 0, again.out);
    assert.equal(again.stdout, '');
    assert.equal(again.stderr, `execution ${id} had already ended (cancelled): nothing was cancelled\n`);
  });

  it('an execution started by the HTTP trigger is reported at its end by a signed callback that both verifiers accept, and a tampered body fails', async () => {
    const got: { body: string; headers: IncomingHttpHeaders }[] = [];
    const receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        got.push({ body, headers: req.headers });
        res.end('ok');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const port = (receiver.address() as { port: number }).port;
    const secret = `whsec_${randomBytes(24).toString('base64')}`;
    try {
      const cur = await api(s, `/jobs/${JOB}?show_secrets=true`);
      const spec = {
        ...cur.body.spec,
        triggers: [
          {
            type: 'http-async',
            configuration: { callbackUrl: `http://127.0.0.1:${port}/hook`, callbackSecret: secret },
          },
        ],
      };
      const put = await api(s, `/jobs/${JOB}`, { method: 'PUT', json: { metadata: { name: JOB }, spec } });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      // Started through the job's HTTP trigger (private: a credential is needed).
      const trigger = `${s.url}/run/default/jobs/${JOB}`;
      const anon = await fetch(trigger, { method: 'POST', body: '{}' });
      assert.equal(anon.status, 401);
      const started = await fetch(trigger, {
        method: 'POST',
        headers: { authorization: `Bearer ${s.adminKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ tasks: [{ name: 'cb' }] }),
      });
      const c = { body: await started.json() };
      assert.equal(started.status, 200, JSON.stringify(c.body));
      await waitExecution(s, JOB, c.body.executionId);
      for (let i = 0; i < 100 && !got.length; i++) await sleep(100);
      assert.equal(got.length, 1);
      const { body, headers } = got[0];
      const parsed = JSON.parse(body);
      assert.equal(parsed.executionId, c.body.executionId);
      assert.equal(parsed.status, 'succeeded');
      assert.equal(parsed.stats.success, 1);
      const h = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, String(v)]));
      assert.deepEqual(new Webhook(secret).verify(body, h), parsed);
      const sdk = (b: string) =>
        verifyWebhookSignature({
          body: b,
          secret,
          signature: h['x-blaxel-signature'],
          timestamp: h['x-blaxel-timestamp'],
        });
      assert.equal(sdk(body), true);
      const tampered = body.replace('succeeded', 'failed');
      assert.throws(() => new Webhook(secret).verify(tampered, h));
      assert.equal(sdk(tampered), false);
    } finally {
      receiver.close();
    }
  });
});
