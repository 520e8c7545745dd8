// `berth node drain --wait` (decision 082): the node read says what a node still holds (sandboxes placed on it,
// instances running, roles led), and the CLI waits until it holds nothing, or fails at its timeout saying what is
// left. Two `berth serve` processes on one PostgreSQL; node-b also serves region `eu-lon-1`, which node-a does not.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { TEST_MEMORY_MB } from '../sandboxes/support.js';
import { berth } from '../berth-cli.js';
import { stopped } from '../serve-process.js';
import { type Proc, sleep, useCluster } from './cluster-support.js';

describe('drain --wait: a drained node until it holds nothing', () => {
  const cluster = useCluster(['node-a', 'node-b'], {
    prefix: 'drainwait',
    envOf: (id) => ({ BERTH_REGIONS: id === 'node-b' ? 'local,eu-lon-1' : 'local' }),
  });
  const { api } = cluster;
  let a: Proc;
  let b: Proc;
  const admin = (p: Proc) => ({ url: p.url, adminKey: cluster.key });
  const node = async (p: Proc, id: string) => (await cluster.nodes(p)).find((n) => n.id === id);
  const create = async (p: Proc, name: string, spec: Record<string, unknown>) => {
    const r = await api(p, '/sandboxes', {
      method: 'POST',
      json: { metadata: { name }, spec: { ...spec, runtime: { memory: TEST_MEMORY_MB } } },
    });
    const sb = await r.json();
    assert.equal(r.status, 200, JSON.stringify(sb));
    return sb;
  };

  before(async () => {
    a = cluster.node('node-a');
    b = cluster.node('node-b');
    // node-a places by the node list it reads every 500 ms: once it lists node-b's region, and a read later.
    for (let i = 0; i < 50 && !(await node(a, 'node-b'))?.regions.includes('eu-lon-1'); i++) await sleep(100);
    await sleep(1000);
  });

  it('fails at its timeout saying what the drained node still holds, then returns once it holds nothing', async () => {
    // Only node-b serves `eu-lon-1`: drained, it keeps that sandbox (never started in another region).
    const east = await create(a, 'east-1', { region: 'eu-lon-1' });
    assert.equal(east.node, 'node-b');
    const listed = await node(a, 'node-b');
    assert.equal(listed.empty, false);
    assert.ok(listed.holds.sandboxes >= 1, JSON.stringify(listed));

    const timedOut = await berth(admin(a), ['node', 'drain', 'node-b', '--wait', '--timeout', '3']);
    assert.equal(timedOut.code, 1, timedOut.out);
    assert.match(timedOut.stdout, /node node-b drained/);
    assert.match(timedOut.stderr, /node node-b still holds 1 sandbox\(es\) placed on it.* after 3 s/);

    // Once the sandbox is gone, node-b holds nothing: no sandbox, no instance, no lead.
    assert.ok((await api(a, '/sandboxes/east-1', { method: 'DELETE' })).ok);
    const done = await berth(admin(a), ['node', 'drain', 'node-b', '--wait', '--timeout', '60']);
    assert.equal(done.code, 0, done.out);
    assert.match(done.stdout, /node node-b holds nothing/);
    const empty = await node(b, 'node-b');
    assert.equal(empty.empty, true, JSON.stringify(empty));
    assert.deepEqual(empty.holds, { sandboxes: 0, instances: 0, leads: [] });
    const undo = await berth(admin(a), ['node', 'undrain', 'node-b']);
    assert.equal(undo.code, 0, undo.out);
  });

  it('waits for a drained leader to hand over its lead and its sandboxes', async () => {
    // Placement draws between the two nodes: create until one lands on node-a.
    let onA = '';
    for (let i = 0; i < 8 && !onA; i++) {
      const sb = await create(b, `here-${i}`, {});
      if (sb.node === 'node-a') onA = sb.metadata.name;
    }
    assert.ok(onA, 'no sandbox was placed on node-a');
    const leader = await node(b, 'node-a');
    assert.deepEqual(leader.holds.leads, ['controllers']);
    const done = await berth(admin(b), ['node', 'drain', 'node-a', '--wait', '--timeout', '60']);
    assert.equal(done.code, 0, done.out);
    assert.match(done.stdout, /node node-a holds nothing/);
    await stopped(a.child);
    assert.equal(a.child.exitCode, 75);
    const gone = await node(b, 'node-a');
    assert.equal(gone.empty, true, JSON.stringify(gone));
    assert.notEqual((await (await api(b, `/sandboxes/${onA}`)).json()).node, 'node-a');
    for (let i = 0; i < 50 && !(await node(b, 'node-b')).leads.includes('controllers'); i++) await sleep(100);
    assert.deepEqual((await node(b, 'node-b')).leads, ['controllers']);
  });
});
