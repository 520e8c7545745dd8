// A running task's output followed live (the API's ?follow=true and `berth logs job -f`) through a retry to the
// task's end, and the task's own credential: it reads its own execution while the execution runs, nothing else,
// and stops working when the execution ends.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type SandboxServer, startSandboxServer } from '../sandboxes/support.js';
import { api, berth, deployJob, waitExecution } from './support.js';

const JOB = 'live';

describe('job task logs followed live, and the task credential', () => {
  let s: SandboxServer;
  let work: string;
  before(async () => {
    s = await startSandboxServer();
    work = mkdtempSync(join(tmpdir(), 'berth-jobs-live-'));
    await deployJob(s, join(work, 'job'), JOB, {
      memory: 256,
      maxConcurrentTasks: 2,
      maxRetries: 1,
      timeout: 120,
    });
  });
  after(async () => {
    await s.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('follows a task live through its retry until it ends; the CLI -f prints the same, each attempt once', async () => {
    // Each attempt prints, then sleeps: what the follower sees before the attempt ends can only come live.
    const c = await api(s, `/jobs/${JOB}/executions`, {
      method: 'POST',
      json: { tasks: [{ name: 'followed', sleep: 4, failAttempts: 1 }] },
    });
    assert.equal(c.status, 200, JSON.stringify(c.body));
    const id = c.body.executionId;
    const logsPath = `/jobs/${JOB}/executions/${id}/tasks/0/logs`;
    const cli = berth(s, ['logs', 'job', JOB, '--execution', id, '--task', '0', '-f']);
    const res = await fetch(`${s.url}/v0${logsPath}?follow=true`, {
      headers: { authorization: `Bearer ${s.adminKey}` },
    });
    assert.equal(res.status, 200);
    let text = '';
    let keptWhenSeen: string | undefined;
    const dec = new TextDecoder();
    for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
      text += dec.decode(chunk, { stream: true });
      if (keptWhenSeen === undefined && /attempt 1 of execution/.test(text))
        keptWhenSeen = (await api(s, logsPath)).body;
    }
    assert.equal(keptWhenSeen, '', 'the first attempt was streamed while it ran, before its log was kept');
    const e = (await api(s, `/jobs/${JOB}/executions/${id}`)).body;
    assert.equal(e.tasks[0].status, 'succeeded', 'the stream ended with the task');
    assert.equal(text.match(/^--- attempt 1 ---$/gm)?.length, 1, text);
    assert.equal(text.match(/^--- attempt 2 ---$/gm)?.length, 1, text);
    assert.equal(text.match(/attempt 1 of execution/g)?.length, 1, text);
    assert.equal(text.match(/hello, followed/g)?.length, 1, text);
    assert.doesNotMatch(text, /stdout:|\[keepalive\]/, 'the daemon framing is removed');
    const r = await cli;
    assert.equal(r.code, 0, r.out);
    assert.equal(r.stdout.match(/attempt 2 of execution/g)?.length, 1, r.out);
    assert.match(r.stdout, /hello, followed/);
  });

  it('gives tasks a credential that reads their own execution only, revoked when it ends', async () => {
    // The task prints its BL_API_KEY (test only) and keeps running while the test uses it from outside.
    const other = await api(s, `/jobs/${JOB}/executions`, { method: 'POST', json: { tasks: [{}] } });
    const c = await api(s, `/jobs/${JOB}/executions`, {
      method: 'POST',
      json: { tasks: [{ env: 'BL_API_KEY', sleep: 6 }] },
    });
    const id = c.body.executionId;
    const res = await fetch(`${s.url}/v0/jobs/${JOB}/executions/${id}/tasks/0/logs?follow=true`, {
      headers: { authorization: `Bearer ${s.adminKey}` },
    });
    let text = '';
    let key: string | undefined;
    const dec = new TextDecoder();
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    while (!key) {
      const { value, done } = await reader.read();
      assert.ok(!done, `the task printed no key: ${text}`);
      text += dec.decode(value, { stream: true });
      key = /env BL_API_KEY=(\S+)\n/.exec(text)?.[1];
    }
    const as = (path: string, method = 'GET') =>
      fetch(`${s.url}/v0${path}`, { method, headers: { authorization: `Bearer ${key}` } });
    assert.equal((await as(`/jobs/${JOB}/executions/${id}`)).status, 200, 'reads its own execution');
    assert.equal((await as(`/jobs/${JOB}/executions/${id}/tasks`)).status, 200);
    assert.equal((await as(`/jobs/${JOB}/executions/${id}/tasks/0/logs`)).status, 200);
    for (const [path, method] of [
      [`/jobs/${JOB}/executions/${other.body.executionId}`, 'GET'],
      [`/jobs/${JOB}/executions/${id}`, 'DELETE'],
      [`/jobs/${JOB}/executions`, 'GET'],
      [`/jobs/${JOB}/executions`, 'POST'],
      [`/jobs/${JOB}`, 'GET'],
      ['/workspaces', 'GET'],
      ['/sandboxes', 'GET'],
    ])
      assert.equal((await as(path, method)).status, 403, `${method} ${path} is refused`);
    const e = await waitExecution(s, JOB, id);
    await reader.cancel();
    assert.equal(e.status, 'succeeded', JSON.stringify(e.tasks));
    assert.equal((await as(`/jobs/${JOB}/executions/${id}`)).status, 401, 'revoked when the execution ended');
  });
});
