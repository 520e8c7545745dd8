// Standby: an idle sandbox is frozen (state STANDBY) and any request resumes it, with its processes and files
// exactly as they were.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { sandboxId } from '../../src/runtime/sandbox-id.js';
import type { LinuxDriver } from '../../src/runtime/index.js';
import { exec, inspectingDriver, type SandboxServer, startSandboxServer } from './support.js';

const CYCLES = 100;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls the runtime (not the store) until the sandbox is frozen; bounded. */
async function untilFrozen(driver: LinuxDriver, id: string) {
  for (let i = 0; i < 2000; i++) {
    if ((await driver.inspect(id))?.state === 'frozen') return;
    await sleep(5);
  }
  assert.fail(`sandbox ${id} never went to standby`);
}

describe('standby after BERTH_STANDBY_AFTER=1', () => {
  let s: SandboxServer;
  before(async () => {
    s = await startSandboxServer({ BERTH_STANDBY_AFTER: '1' });
  });
  after(() => s.close());

  it('goes STANDBY when idle, and a request to it answers and brings it back to RUNNING', async () => {
    const sb = await s.create('idle-box');
    await exec(s, sb.metadata.url, 'echo before > /tmp/state');
    const asleep = await s.waitFor('idle-box', (b) => b.state === 'STANDBY', 'state STANDBY');
    assert.equal(asleep.status, 'DEPLOYED');
    const read = await s.run(`${sb.metadata.url}/filesystem/${encodeURIComponent('/tmp/state')}`);
    assert.equal(read.status, 200);
    assert.equal((await read.json()).content, 'before\n');
    const awake = await s.waitFor('idle-box', (b) => b.state === 'RUNNING', 'state RUNNING');
    assert.ok(Date.parse(awake.lastUsedAt) > Date.parse(asleep.lastUsedAt), 'lastUsedAt moved forward');
    const standbyEvents = awake.events.filter(
      (e: any) => e.status !== 'DEPLOYING' && e.status !== 'DEPLOYED',
    );
    assert.deepEqual(standbyEvents, [], 'standby and wake-up add no events');
  });

  it('stays awake while a keepAlive process runs', async () => {
    const driver = await inspectingDriver(s.dataDir);
    try {
      const sb = await s.create('busy-box');
      const started = await s.run(`${sb.metadata.url}/process`, {
        method: 'POST',
        json: { command: 'sleep 600', name: 'holder', keepAlive: true },
      });
      assert.equal(started.status, 200);
      await sleep(3000); // three standby periods
      assert.equal((await driver.inspect(sandboxId('default', 'busy-box')))?.state, 'running');
      assert.equal((await (await s.api('/sandboxes/busy-box')).json()).state, 'RUNNING');
      assert.equal((await s.run(`${sb.metadata.url}/process/holder/kill`, { method: 'DELETE' })).status, 200);
      await untilFrozen(driver, sandboxId('default', 'busy-box'));
    } finally {
      await driver.close();
    }
  });
});

describe(`${CYCLES} standby and wake-up cycles`, () => {
  let s: SandboxServer;
  let driver: LinuxDriver;
  before(async () => {
    // A standby delay of 50 ms makes a cycle cost about a tenth of a second.
    s = await startSandboxServer({ BERTH_STANDBY_AFTER: '0.05' });
    driver = await inspectingDriver(s.dataDir);
  });
  after(async () => {
    await driver.close();
    await s.close();
  });

  it('keeps a running counter and the files byte-identical across every cycle', async () => {
    const sb = await s.create('cycle-box');
    const id = sandboxId('default', 'cycle-box');
    const url = sb.metadata.url;
    const file = `${url}/filesystem/${encodeURIComponent('/home/user/blob.bin')}`;
    const blob = randomBytes(256 * 1024);
    const form = new FormData();
    form.set('file', new Blob([blob]), 'blob.bin');
    assert.equal((await s.run(file, { method: 'PUT', body: form })).status, 200);
    const counter = await s.run(`${url}/process`, {
      method: 'POST',
      json: {
        name: 'counter',
        command: 'i=0; while :; do i=$((i+1)); echo $i > /tmp/n.tmp; mv /tmp/n.tmp /tmp/n; sleep 0.002; done',
      },
    });
    assert.equal(counter.status, 200);
    const pid = (await counter.json()).pid;
    const countUrl = `${url}/filesystem/${encodeURIComponent('/tmp/n')}`;
    const readCount = async () => {
      for (;;) {
        const r = await s.run(countUrl);
        if (r.status === 200) return Number((await r.json()).content);
        await r.body?.cancel();
        await sleep(2); // the first value is not written yet
      }
    };
    let last = await readCount();
    for (let i = 0; i < CYCLES; i++) {
      await untilFrozen(driver, id);
      const n = await readCount(); // this request resumes the sandbox
      assert.ok(n >= last, `cycle ${i}: the count went back from ${last} to ${n}`);
      last = n;
    }
    await sleep(50);
    assert.ok((await readCount()) > last, 'the counter still counts after the last wake-up');
    const proc = await (await s.run(`${url}/process/counter`)).json();
    assert.equal(proc.pid, pid, 'the same process ran all along');
    assert.equal(proc.status, 'running');
    const after = Buffer.from(
      await (await s.run(file, { headers: { accept: 'application/octet-stream' } })).arrayBuffer(),
    );
    assert.equal(
      createHash('sha256').update(after).digest('hex'),
      createHash('sha256').update(blob).digest('hex'),
    );
  });
});
