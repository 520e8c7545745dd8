// The instances module over the fake runtime, with a daemon-shaped /health server on a unix socket: an instance
// records its owner; a start whose daemon never answers leaves nothing and gives its lease back; removal gives the
// lease back; a removal that fails is tried again, but never against a new instance of its id; the garbage collector keeps what each owner kind wants, asks the kind an instance of an earlier
// server (no owner recorded) belonged to by its id, and removes what no owner kind answers for.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { InstanceOwner, SandboxSpec } from './driver.js';
import { FakeDriver } from './fake.js';
import { Instances, type OwnedInstance } from './instances.js';

const spec: SandboxSpec = {
  memoryMb: 256,
  pidsMax: 64,
  cpuShares: 128,
  diskMb: 256,
  envs: {},
  image: 'blaxel/base-image:latest',
  volumes: [],
};
const owner = (kind: string, name: string, role: InstanceOwner['role']): InstanceOwner => ({
  kind,
  workspace: 'ws',
  name,
  role,
});

describe('runtime instances', () => {
  let dir: string;
  let health: Server;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-instances-'));
    health = createServer((_req, res) => res.end(JSON.stringify({ status: 'ok', activeKeepAlive: 0 })));
    await new Promise<void>((r) => health.listen(join(dir, 'up.sock'), r));
  });
  after(() => {
    health.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A fake runtime whose instances answer on the one /health socket, or nowhere (`down`). */
  const runtime = (down = false) => {
    const driver = new FakeDriver(undefined, { socketDir: dir });
    driver.socketPath = () => join(dir, down ? 'nobody.sock' : 'up.sock');
    return driver;
  };
  const lease = () => {
    const l = { released: 0, release: () => void l.released++ };
    return l;
  };

  it('starts an instance for its owner, waits for its daemon, and gives the lease back when it goes', async () => {
    const driver = runtime();
    const instances = new Instances({ driver });
    const l = lease();
    const { info, daemon } = await instances.start({
      id: 'wl-a-1',
      spec,
      owner: owner('Agent', 'a', 'replica'),
      lease: l,
    });
    assert.deepEqual(info.owner, owner('Agent', 'a', 'replica'));
    assert.equal((await daemon.health()).status, 'ok');
    assert.deepEqual(
      (await instances.list()).map((i) => [i.id, i.role]),
      [['wl-a-1', 'replica']],
    );
    assert.equal(l.released, 0, 'held while it runs');
    await instances.remove('wl-a-1');
    assert.equal(l.released, 1);
    assert.deepEqual(await driver.list(), []);
  });

  it('a start whose daemon does not answer leaves no instance and gives its lease back', async () => {
    const driver = runtime(true);
    const instances = new Instances({ driver, healthWaitMs: 50 });
    const l = lease();
    await assert.rejects(
      instances.start({ id: 'job-t-1', spec, owner: owner('Job', 'j', 'task'), lease: l }),
      /ENOENT|ECONNREFUSED/,
    );
    assert.deepEqual(await driver.list(), []);
    assert.equal(l.released, 1);
  });

  /** A fake runtime whose removals fail `failures` times (a namespace slow to go) before they succeed. */
  const stubborn = (failures: number) => {
    const driver = runtime();
    const remove = driver.remove.bind(driver);
    let tries = 0;
    driver.remove = async (id: string) => {
      if (++tries <= failures) throw new Error(`removal ${tries} failed`);
      await remove(id);
    };
    return { driver, tries: () => tries };
  };
  const waitFor = async (what: string, ok: () => Promise<boolean>) => {
    for (const end = Date.now() + 10_000; !(await ok()); await new Promise((r) => setTimeout(r, 10)))
      if (Date.now() > end) assert.fail(`${what}: not within 10 s`);
  };

  it('a removal that fails is tried again until the instance is gone', async () => {
    const { driver, tries } = stubborn(2);
    const instances = new Instances({ driver, removeRetryMs: 5 });
    await instances.start({ id: 'job-r-0-1', spec, owner: owner('Job', 'j', 'task') });
    await assert.rejects(instances.remove('job-r-0-1'), /removal 1 failed/);
    await waitFor('removed by a retry', async () => (await driver.list()).length === 0);
    assert.equal(tries(), 3, 'tried until it succeeded, then no more');
  });

  it('a new instance of the same id is not removed by the retry of an earlier one', async () => {
    const { driver, tries } = stubborn(1);
    const instances = new Instances({ driver, removeRetryMs: 50 });
    await instances.start({ id: 'ws.again', spec, owner: owner('Sandbox', 'again', 'sandbox') });
    await assert.rejects(instances.remove('ws.again'), /removal 1 failed/);
    await instances.start({ id: 'ws.again', spec, owner: owner('Sandbox', 'again', 'sandbox') });
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(
      (await driver.list()).map((i) => i.id),
      ['ws.again'],
    );
    assert.equal(tries(), 1, 'the retry was dropped');
  });

  it('collects what no owner wants, asking each owner kind about its own instances only', async () => {
    const driver = runtime();
    const instances = new Instances({ driver });
    await driver.ensure('ws.kept', { ...spec, owner: owner('Sandbox', 'kept', 'sandbox') });
    await driver.ensure('ws.gone', { ...spec, owner: owner('Sandbox', 'gone', 'sandbox') });
    await driver.ensure('job-x-0-1', { ...spec, owner: owner('Job', 'j', 'task') });
    // An earlier server's instances: no owner recorded, their kind known by their ids.
    await driver.ensure('ws.old', spec);
    await driver.ensure('job-y-0-1', spec);
    // Of a kind no one registered (nothing answers for it).
    await driver.ensure('odd', { ...spec, owner: owner('Unknown', 'u', 'replica') });
    const asked = new Map<string, string[]>();
    const ask = (kind: string, wanted: string[]) => async (mine: OwnedInstance[]) => {
      asked.set(kind, mine.map((i) => `${i.id}:${i.role}`).sort());
      return wanted;
    };
    instances.register({
      kinds: ['Sandbox'],
      legacyRole: (id) => (id.includes('.') ? 'sandbox' : undefined),
      keep: ask('Sandbox', ['ws.kept', 'ws.old']),
    });
    instances.register({
      kinds: ['Job'],
      legacyRole: (id) => (id.startsWith('job-') ? 'task' : undefined),
      keep: ask('Job', ['job-y-0-1']),
    });
    const removed = await instances.collect();
    assert.deepEqual(asked.get('Sandbox'), ['ws.gone:sandbox', 'ws.kept:sandbox', 'ws.old:sandbox']);
    assert.deepEqual(asked.get('Job'), ['job-x-0-1:task', 'job-y-0-1:task']);
    assert.deepEqual(removed.sort(), ['job-x-0-1', 'odd', 'ws.gone']);
    assert.deepEqual((await driver.list()).map((i) => i.id).sort(), ['job-y-0-1', 'ws.kept', 'ws.old']);
  });
});
