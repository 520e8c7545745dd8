// Persistent job volumes on real sandboxes: a task writes to the job's volume and the next execution's task reads
// it; the volume is held by the job (`job:<name>`) and let go when the job is deleted; a writable persistent
// volume with parallel tasks is refused.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { seedNodeCache } from '../../src/test-support/dependency-cache.js';
import { type SandboxServer, startSandboxServer } from '../sandboxes/support.js';
import { api, berth, JOB_TEMPLATE, REPO, waitExecution } from './support.js';

const TASK = `import { appendFileSync, readFileSync } from 'node:fs';
import { blStartJob } from '@blaxel/core';
blStartJob(async (input) => {
  appendFileSync('/data/log', input.append + '\\n');
  console.log('CONTENT ' + JSON.stringify(readFileSync('/data/log', 'utf8')));
});
`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('persistent job volumes', () => {
  let s: SandboxServer;
  let work: string;
  before(async () => {
    s = await startSandboxServer({});
    work = mkdtempSync(join(tmpdir(), 'berth-job-vol-'));
  });
  after(async () => {
    await s.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('a task writes to the job volume and the next execution reads it; deleting the job detaches it', async () => {
    assert.equal(
      (await api(s, '/volumes', { method: 'POST', json: { metadata: { name: 'jd' }, spec: { size: 16 } } }))
        .status,
      200,
    );
    const dir = join(work, 'job');
    cpSync(JOB_TEMPLATE, dir, { recursive: true });
    writeFileSync(join(dir, 'index.js'), TASK);
    writeFileSync(
      join(dir, 'berth.toml'),
      'type = "job"\nname = "vj"\n[runtime]\nmemory = 256\ntimeout = 120\n',
    );
    seedNodeCache(s.dataDir, 'default', dir, REPO);
    const d = await berth(s, ['deploy', dir]);
    assert.equal(d.code, 0, d.out);
    const job = (await api(s, '/jobs/vj')).body;
    const spec = { ...job.spec, volumes: [{ name: 'jd', mountPath: '/data', type: 'persistent' }] };
    const put = await api(s, '/jobs/vj', { method: 'PUT', json: { metadata: job.metadata, spec } });
    assert.equal(put.status, 200, JSON.stringify(put.body));

    const logs: string[] = [];
    for (const word of ['one', 'two']) {
      const c = await api(s, '/jobs/vj/executions', { method: 'POST', json: { tasks: [{ append: word }] } });
      assert.equal(c.status, 200, JSON.stringify(c.body));
      const e = await waitExecution(s, 'vj', c.body.executionId);
      const log = (await api(s, `/jobs/vj/executions/${c.body.executionId}/tasks/0/logs`)).body as string;
      assert.equal(e.status, 'succeeded', log);
      logs.push(log);
    }
    assert.match(logs[1], /CONTENT "one\\ntwo\\n"/, 'the second execution read what the first wrote');
    assert.equal((await api(s, '/volumes/jd')).body.state?.attachedTo, 'job:vj');

    assert.equal((await api(s, '/jobs/vj', { method: 'DELETE' })).status, 200);
    let held: string | undefined = 'job:vj';
    for (let i = 0; i < 200 && held; i++) {
      await sleep(100);
      held = (await api(s, '/volumes/jd')).body.state?.attachedTo;
    }
    assert.equal(held, undefined, 'the deleted job let its volume go');
  });

  it('refuses a writable persistent volume on a job whose tasks run in parallel', async () => {
    const r = await api(s, '/jobs', {
      method: 'POST',
      json: {
        metadata: { name: 'par' },
        spec: { runtime: { maxConcurrentTasks: 4 }, volumes: [{ name: 'jd', mountPath: '/data' }] },
      },
    });
    assert.equal(r.status, 422, JSON.stringify(r.body));
    assert.match(JSON.stringify(r.body), /maxConcurrentTasks 1/);
  });
});
