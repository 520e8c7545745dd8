// `GET /v0/<kind>/{name}/debug` and `berth debug` on real sandboxes: a healthy one, one in standby, one whose
// process the out-of-memory killer ended, one whose daemon was killed (before anything started it again); the
// most likely cause is named in one line. Another tenant reaches none of it.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { sandboxId } from '../../src/runtime/sandbox-id.js';
import { newTenant } from '../../src/test-support/tenants.js';
import { berth } from '../berth-cli.js';
import { exec, inspectingDriver, type SandboxServer, startSandboxServer, TEST_MEMORY_MB } from './support.js';

const MB = 1024 * 1024;

describe('debug: what is wrong with an object', () => {
  let s: SandboxServer;
  const debug = async (path: string, key?: string) => {
    const r = await s.api(`${path}/debug`, key ? { key } : {});
    const body = await r.json();
    assert.equal(r.status, 200, JSON.stringify(body));
    return body;
  };
  before(async () => {
    s = await startSandboxServer({ BERTH_FAULT_CHECK_EVERY: '0.2', BERTH_STANDBY_AFTER: '3600' });
  });
  after(() => s.close());

  it('a healthy sandbox: running, its figures against its limits, its daemon, nothing wrong', async () => {
    await s.create('fine', { network: { allowedDomains: ['allowed.test'] } });
    const d = await debug('/sandboxes/fine');
    assert.equal(d.status, 'DEPLOYED');
    const [i] = d.instances;
    assert.equal(i.state, 'running');
    assert.equal(i.memory.limitBytes, TEST_MEMORY_MB * MB);
    assert.ok(i.memory.usedBytes > 0);
    assert.ok(i.pids.current > 0 && i.pids.max >= 64);
    assert.equal(i.disk.limitBytes, TEST_MEMORY_MB * MB);
    assert.equal(i.daemon.answered, true);
    assert.deepEqual(d.network, { allowedDomains: ['allowed.test'], egress: 'direct', proxy: 'running' });
    assert.match(d.cause, /^nothing looks wrong: running, its daemon answers, memory \d+ MB of 256 MB$/);
    assert.ok(d.events.length >= 2);
  });

  it('a process ended for lack of memory is the likely cause, and `berth debug` prints it first', async () => {
    const sb = await s.create('eater');
    await exec(s, sb.metadata.url, 'node -e "const a=[];for(;;)a.push(Buffer.alloc(1e7,1))"');
    await s.waitFor(
      'eater',
      (b) => b.events.some((e: any) => e.message.startsWith('out of memory')),
      'the event',
    );
    const d = await debug('/sandboxes/eater');
    assert.match(d.cause, /^recently: out of memory: the kernel ended a process in the sandbox/);
    assert.ok(d.instances[0].memory.oomKills >= 1);
    const cli = await berth(s, ['debug', 'sandbox', 'eater']);
    assert.equal(cli.code, 0, cli.out);
    const lines = cli.stdout.split('\n');
    assert.equal(lines[0], 'sandbox eater (workspace default): DEPLOYED, RUNNING');
    assert.match(lines[1], /^cause: recently: out of memory/);
    assert.match(
      cli.stdout,
      /\n {2}memory {3}\d+(\.\d)? MB of 256 MB \(peak \d+(\.\d)? MB\), [1-9]\d* ended by the out-of-memory killer\n/,
    );
    const json = JSON.parse((await berth(s, ['debug', 'sandbox', 'eater', '-o', 'json'])).stdout);
    assert.equal(json.cause, d.cause);
  });

  it('a sandbox whose daemon was killed shows dead (or started again), with the daemon named as what ended', async () => {
    await s.create('stopped');
    const driver = await inspectingDriver(s.dataDir);
    try {
      const id = sandboxId('default', 'stopped');
      // A short-lived process of the sandbox may end between the listing and the read: it is not the daemon.
      const cmdline = (p: number) => {
        try {
          return readFileSync(`/proc/${p}/cmdline`, 'utf8');
        } catch {
          return '';
        }
      };
      for (const p of driver.cgroup(id)!.pids())
        if (cmdline(p).includes('daemon.cjs')) process.kill(p, 'SIGKILL');
      for (let i = 0; i < 200 && (await driver.inspect(id))?.state !== 'dead'; i++)
        await new Promise((r) => setTimeout(r, 25));
    } finally {
      await driver.close();
    }
    // The fault sweep (every 0.2 s here) hands a dead sandbox to its controller, which starts it again: the report
    // shows it dead, or already started again with the daemon's end as what happened recently.
    const d = await debug('/sandboxes/stopped');
    if (d.instances[0].state === 'dead') {
      assert.equal(d.instances[0].daemon.answered, false);
      assert.match(d.cause, /^the sandbox ended: its API daemon and every process stopped/);
    } else
      assert.match(d.cause, /^recently: the sandbox had stopped: its API daemon ended/, JSON.stringify(d));
  });

  it('a sandbox in standby is not woken to be looked at', async () => {
    const sb = await s.create('sleeper');
    const driver = await inspectingDriver(s.dataDir);
    try {
      await driver.freeze(sandboxId('default', 'sleeper'));
      const d = await debug('/sandboxes/sleeper');
      assert.equal(d.instances[0].state, 'frozen');
      assert.equal(d.instances[0].daemon.answered, false);
      assert.match(d.instances[0].daemon.error, /standby/);
      assert.equal(d.cause, 'nothing looks wrong: in standby (frozen); the next request wakes it');
      assert.equal((await driver.inspect(sandboxId('default', 'sleeper')))?.state, 'frozen', 'still frozen');
      await driver.thaw(sandboxId('default', 'sleeper'));
      assert.equal((await exec(s, sb.metadata.url, 'true')).exitCode, 0);
    } finally {
      await driver.close();
    }
  });

  it("every kind with a status has it: a volume's is its status and events", async () => {
    assert.equal(
      (await s.api('/volumes', { method: 'POST', json: { metadata: { name: 'vol' }, spec: { size: 16 } } }))
        .status,
      200,
    );
    const d = await debug('/volumes/vol');
    assert.equal(d.kind, 'Volume');
    assert.deepEqual(d.instances, []);
    assert.ok(typeof d.cause === 'string' && d.cause.length > 0);
  });

  it("another tenant reaches none of it: a 404 whether it names its own workspace or the sandbox's", async () => {
    const other = await newTenant(s, 'debug-other');
    for (const headers of [{}, { 'x-blaxel-workspace': 'default' }] as Record<string, string>[]) {
      const r = await s.api('/sandboxes/fine/debug', { key: other.key, headers });
      assert.ok([403, 404].includes(r.status), `${r.status}`);
      assert.ok(!(await r.text()).includes('allowed.test'));
    }
  });
});
