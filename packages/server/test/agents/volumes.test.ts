// Volumes on an agent's replicas, end to end on real sandboxes: the agent's handler writes under its mountPath
// and reads it back; a read-only mount is read-only inside; the volume is held by `agent:<name>` (a second agent
// naming it is FAILED naming the first); deleting the agent lets it go, and a sandbox mounting it then finds the
// file the agent wrote; a function's replicas mount theirs alike; a writable volume on an agent that may run
// several replicas is a 422. After a server restart the replica started with volumes is re-adopted (same sandbox,
// same process), and one started after a restart has its mounts too.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { berth } from '../berth-cli.js';
import { removeDirLater, unmountVolumesIn } from '../../src/test-support/sandboxes.js';
import {
  exec,
  inspectingDriver,
  removeAllSandboxes,
  type SandboxServer,
  startSandboxServer,
} from '../sandboxes/support.js';

const FIXTURE = join(import.meta.dirname, 'fixtures/volume-files');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let s: SandboxServer;
let work: string;

const json = async (path: string, init: { method?: string; json?: unknown } = {}) => {
  const res = await s.api(path, init);
  return { status: res.status, body: (await res.json()) as any };
};
/** Creates the agent with `spec` (its volumes) first; `berth deploy` keeps them when it uploads the code. */
async function deployAgent(name: string, spec: Record<string, unknown>, plural = 'agents') {
  const c = await json(`/${plural}`, { method: 'POST', json: { metadata: { name }, spec } });
  assert.equal(c.status, 200, JSON.stringify(c.body));
  const dir = join(work, name);
  cpSync(FIXTURE, dir, { recursive: true });
  const type = plural === 'functions' ? 'function' : 'agent';
  writeFileSync(join(dir, 'berth.toml'), `type = "${type}"\nname = "${name}"\n[runtime]\nmemory = 256\n`);
  return berth(s, ['deploy', dir]);
}
const call = async (agent: string, path: string, plural = 'agents') => {
  let res = await s.run(`${s.url}/run/default/${plural}/${agent}${path}`);
  // A server just started serves the agent once its first reconcile re-adopted or started the replica.
  for (let i = 0; i < 600 && res.status === 503; i++) {
    await res.body?.cancel();
    await sleep(100);
    res = await s.run(`${s.url}/run/default/${plural}/${agent}${path}`);
  }
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  return body as { ok?: boolean; content?: string; error?: string };
};
const holder = async (volume: string) => (await json(`/volumes/${volume}`)).body.state?.attachedTo;
const createVolume = async (name: string) =>
  assert.equal(
    (await json('/volumes', { method: 'POST', json: { metadata: { name }, spec: { size: 16 } } })).status,
    200,
  );

describe('volumes on agents', () => {
  before(async () => {
    s = await startSandboxServer({});
    work = mkdtempSync(join(tmpdir(), 'berth-agent-vol-'));
    for (const name of ['notes', 'shared', 'fnvol']) await createVolume(name);
  });
  after(async () => {
    await s.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('the handler writes to its volume, reads it back, and cannot write its read-only one', async () => {
    const d = await deployAgent('writer', {
      volumes: [
        { name: 'notes', mountPath: '/data' },
        { name: 'shared', mountPath: '/shared', readOnly: true },
      ],
    });
    assert.equal(d.code, 0, d.out);
    const o = (await json('/agents/writer')).body;
    assert.equal(o.status, 'DEPLOYED');
    assert.equal(o.spec.runtime.maxScale, 1, 'a writable volume runs one replica unless asked');
    assert.doesNotMatch(o.events.at(-1).message, /not applied/);
    assert.deepEqual(await call('writer', '/write?path=/data/hello&text=from-the-agent'), { ok: true });
    assert.deepEqual(await call('writer', '/read?path=/data/hello'), { content: 'from-the-agent' });
    assert.deepEqual(await call('writer', '/write?path=/shared/x&text=no'), { error: 'EROFS' });
    assert.equal(await holder('notes'), 'agent:writer');
    assert.equal(await holder('shared'), 'agent:writer');
  });

  it('a second agent naming a held volume is FAILED naming the holder', async () => {
    const d = await deployAgent('second', { volumes: [{ name: 'notes', mountPath: '/data' }] });
    assert.notEqual(d.code, 0, d.out);
    const o = (await json('/agents/second')).body;
    assert.equal(o.status, 'FAILED');
    assert.match(o.events.at(-1).message, /volume "notes" is attached to agent:writer/);
    assert.equal(await holder('notes'), 'agent:writer');
  });

  it("a function's replica mounts its volume too, held as function:<name>", async () => {
    const d = await deployAgent(
      'fnwriter',
      { volumes: [{ name: 'fnvol', mountPath: '/data' }] },
      'functions',
    );
    assert.equal(d.code, 0, d.out);
    assert.deepEqual(await call('fnwriter', '/write?path=/data/f&text=fn', 'functions'), { ok: true });
    assert.deepEqual(await call('fnwriter', '/read?path=/data/f', 'functions'), { content: 'fn' });
    assert.equal(await holder('fnvol'), 'function:fnwriter');
    assert.equal((await s.api('/functions/fnwriter', { method: 'DELETE' })).status, 200);
    let held: string | undefined = 'function:fnwriter';
    for (let i = 0; i < 300 && held; i++) {
      await sleep(100);
      held = await holder('fnvol');
    }
    assert.equal(held, undefined, 'the deleted function let its volume go');
  });

  it('a writable volume with maxScale 2 is a 422 naming the field', async () => {
    const r = await json('/agents', {
      method: 'POST',
      json: {
        metadata: { name: 'scaled' },
        spec: { runtime: { maxScale: 2 }, volumes: [{ name: 'notes', mountPath: '/data' }] },
      },
    });
    assert.equal(r.status, 422, JSON.stringify(r.body));
    assert.match(JSON.stringify(r.body), /\/spec\/volumes\/0\/readOnly/);
    assert.match(JSON.stringify(r.body), /runtime\.maxScale 1/);
    assert.equal((await s.api('/agents/scaled')).status, 404, 'nothing was written');
  });

  it('deleting the agent lets its volumes go; a sandbox mounting one finds what the agent wrote', async () => {
    assert.equal((await s.api('/agents/second', { method: 'DELETE' })).status, 200);
    assert.equal((await s.api('/agents/writer', { method: 'DELETE' })).status, 200);
    let held: string | undefined = 'agent:writer';
    for (let i = 0; i < 300 && held; i++) {
      await sleep(100);
      held = await holder('notes');
    }
    assert.equal(held, undefined, 'the deleted agent let its volume go');
    assert.equal(await holder('shared'), undefined);
    const sbx = await s.create('reader', { volumes: [{ name: 'notes', mountPath: '/mnt' }] });
    await s.waitFor('reader', (b) => b.status === 'DEPLOYED', 'DEPLOYED');
    const p = await exec(s, sbx.metadata.url, 'cat /mnt/hello');
    assert.equal(p.exitCode, 0, JSON.stringify(p));
    assert.equal(p.logs, 'from-the-agent');
  });
});

describe('volumes on agents across a server restart', () => {
  let dataDir: string;
  const replicas = async () => {
    const d = await inspectingDriver(dataDir);
    try {
      return (await d.list()).filter((i) => i.id.startsWith('wl-')).map((i) => ({ id: i.id, pid: i.pid }));
    } finally {
      await d.close();
    }
  };
  before(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'berth-agent-vol-restart-'));
    work = mkdtempSync(join(tmpdir(), 'berth-agent-vol-'));
  });
  after(async () => {
    await s?.close();
    await removeAllSandboxes(dataDir);
    await unmountVolumesIn(dataDir);
    removeDirLater(dataDir);
    rmSync(work, { recursive: true, force: true });
  });

  it('the replica started with a volume is re-adopted, and one started after the restart mounts it', async () => {
    s = await startSandboxServer({}, dataDir);
    await createVolume('kept');
    const d = await deployAgent('keeper', { volumes: [{ name: 'kept', mountPath: '/data' }] });
    assert.equal(d.code, 0, d.out);
    assert.deepEqual(await call('keeper', '/write?path=/data/f&text=one'), { ok: true });
    const first = await replicas();
    assert.equal(first.length, 1);
    await s.close();

    // The same spec (volumes included) after a restart: the running replica is taken over, not replaced.
    s = await startSandboxServer({}, dataDir);
    assert.deepEqual(await call('keeper', '/write?path=/data/f&text=two'), { ok: true });
    assert.deepEqual(await replicas(), first, 'same replica sandbox and pid');
    await s.close();

    // Its replica gone while the server was down: the next server starts one, with the volume mounted.
    const drv = await inspectingDriver(dataDir);
    await drv.remove(first[0].id);
    await drv.close();
    s = await startSandboxServer({}, dataDir);
    assert.deepEqual(await call('keeper', '/read?path=/data/f'), { content: 'onetwo' });
    const now = await replicas();
    assert.equal(now.length, 1);
    assert.notEqual(now[0].pid, first[0].pid, 'a new replica');
    assert.equal(await holder('kept'), 'agent:keeper');
  });
});
