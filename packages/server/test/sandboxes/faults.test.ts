// Faults a running sandbox meets, each explained on it as an event in plain words (decision 050): a process the
// out-of-memory killer ended while the sandbox runs on; its API daemon killed (the sandbox is started again, the
// event quoting the daemon's end, whether a request or the fault sweep finds it); the egress proxy that carries its
// connections under a network policy killed (down, then back).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { sandboxId } from '../../src/runtime/sandbox-id.js';
import { exec, inspectingDriver, type SandboxServer, startSandboxServer, TEST_MEMORY_MB } from './support.js';

const messages = (b: any): string[] => b.events.map((e: { message: string }) => e.message);

/** Host pids of processes whose command line contains `what`, among `pids` (or every process). */
function pidsRunning(what: string, pids?: number[]): number[] {
  const all =
    pids ??
    readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .map(Number);
  return all.filter((p) => {
    try {
      return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(what);
    } catch {
      return false;
    }
  });
}

const parentOf = (pid: number) => {
  try {
    return Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[1]);
  } catch {
    return undefined;
  }
};

describe('faults explained on the sandbox', () => {
  let s: SandboxServer;
  before(async () => {
    s = await startSandboxServer({ BERTH_FAULT_CHECK_EVERY: '0.2' });
  });
  after(() => s.close());

  it('a process ended for lack of memory leaves an event with the figures, and the sandbox runs on', async () => {
    const sb = await s.create('eater');
    const r = await exec(s, sb.metadata.url, 'node -e "const a=[];for(;;)a.push(Buffer.alloc(1e7,1))"');
    assert.equal(r.exitCode, 137, 'killed');
    const b = await s.waitFor(
      'eater',
      (x) => messages(x).some((m) => m.startsWith('out of memory: the kernel ended a process')),
      'an out-of-memory event',
    );
    assert.equal(b.status, 'DEPLOYED');
    assert.match(messages(b).at(-1)!, new RegExp(`which had used all of its ${TEST_MEMORY_MB} MB .*run on`));
    assert.equal((await exec(s, sb.metadata.url, 'echo still here')).stdout, 'still here\n');
  });

  it('a sandbox whose API daemon is killed is started again, the event saying the daemon ended', async () => {
    const sb = await s.create('daemonless');
    await exec(s, sb.metadata.url, 'echo before > /tmp/marker');
    const driver = await inspectingDriver(s.dataDir);
    try {
      const id = sandboxId('default', 'daemonless');
      const [daemon] = pidsRunning('daemon.cjs', driver.cgroup(id)!.pids());
      assert.ok(daemon, 'the daemon runs in the sandbox');
      process.kill(daemon, 'SIGKILL');
      for (let i = 0; i < 200 && (await driver.inspect(id))?.state !== 'dead'; i++)
        await new Promise((r) => setTimeout(r, 25));
    } finally {
      await driver.close();
    }
    // The next request finds it down: the gateway says so to the controller, which starts it again.
    await s.run(`${sb.metadata.url}/process`).catch(() => undefined);
    const b = await s.waitFor(
      'daemonless',
      (x) => x.status === 'DEPLOYED' && messages(x).some((m) => m.includes('had stopped')),
      'started again',
    );
    assert.match(
      messages(b).find((m) => m.includes('had stopped'))!,
      /^the sandbox had stopped: its API daemon ended and every process in it with it \(the daemon's last output: .*\); starting it again, fresh/,
    );
    assert.equal((await exec(s, b.metadata.url, 'cat /tmp/marker')).exitCode, 1, 'it started fresh');
  });

  it('a sandbox whose API daemon is killed while nothing calls it is started again by the fault sweep', async () => {
    await s.create('unwatched');
    const driver = await inspectingDriver(s.dataDir);
    try {
      const [daemon] = pidsRunning('daemon.cjs', driver.cgroup(sandboxId('default', 'unwatched'))!.pids());
      assert.ok(daemon, 'the daemon runs in the sandbox');
      process.kill(daemon, 'SIGKILL');
    } finally {
      await driver.close();
    }
    // No request: the sweep finds it dead and hands it to its controller.
    const b = await s.waitFor(
      'unwatched',
      (x) => x.status === 'DEPLOYED' && messages(x).some((m) => m.includes('had stopped')),
      'started again without a request',
    );
    assert.equal((await exec(s, b.metadata.url, 'echo up')).stdout.trim(), 'up');
  });

  it('the egress proxy killed: a sandbox under a network policy is told it went down and came back', async () => {
    await s.create('policed', { network: { allowedDomains: ['allowed.test'] } });
    // This server's proxy, a child of this process (another test file's server may run its own beside it); it may
    // still be starting when the create answers.
    const ours = () => pidsRunning('egress/child').filter((p) => parentOf(p) === process.pid);
    for (let i = 0; i < 100 && !ours().length; i++) await new Promise((r) => setTimeout(r, 100));
    const [proxy] = ours();
    assert.ok(proxy, 'the egress proxy runs');
    process.kill(proxy, 'SIGKILL');
    const b = await s.waitFor(
      'policed',
      (x) => messages(x).some((m) => m.startsWith('egress proxy back after')),
      'the proxy back',
    );
    const said = messages(b).filter((m) => m.startsWith('egress proxy'));
    assert.match(said[0], /^egress proxy down: .* was killed \(SIGKILL\); connections through it were cut/);
    assert.match(said[1], /^egress proxy back after \d+ ms: outbound connections .* work again$/);
  });

  it('the egress proxy killed again while it starts: it is started again and the sandbox is told it is back', async () => {
    const ours = () => pidsRunning('egress/child').filter((p) => parentOf(p) === process.pid);
    for (let i = 0; i < 100 && !ours().length; i++) await new Promise((r) => setTimeout(r, 100));
    const [running] = ours();
    assert.ok(running, 'the egress proxy runs');
    const told = (b: any, what: string) =>
      messages(b).filter((m) => m.startsWith(`egress proxy ${what}`)).length;
    const was = await (await s.api('/sandboxes/policed')).json();
    process.kill(running, 'SIGKILL');
    // Its restart comes 200 ms later; killed as soon as it is forked, long before it can say it is ready.
    let starting: number | undefined;
    for (let i = 0; i < 1000 && !starting; i++) {
      starting = ours().find((p) => p !== running);
      if (!starting) await new Promise((r) => setTimeout(r, 5));
    }
    assert.ok(starting, 'the proxy was started again');
    process.kill(starting, 'SIGKILL');
    const b = await s.waitFor(
      'policed',
      (x) => told(x, 'back') > told(was, 'back'),
      'the proxy back after a start cut short',
    );
    assert.ok(
      ours().some((p) => p !== running && p !== starting),
      'a third proxy runs',
    );
    assert.equal(told(b, 'down'), told(was, 'down') + 1, 'one outage, told once');
  });
});
