// Placement by region and warm pool (docs/decisions/077-placement-regions.md): a sandbox goes to a node of its region
// only, preferring one with a warm sandbox of its image; a create no node of its region can take is refused naming
// the region (and nothing of the other nodes or their tenants); validation accepts a region another node serves.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { SecretBox } from '../crypto/secret-box.js';
import { KINDS } from '../kinds/index.js';
import { Resources } from '../store/resources.js';
import { SqliteStore } from '../store/sqlite.js';
import { instanceHolder } from './instance-holder.js';
import { VolumeNodes } from './volume-nodes.js';
import type { Leadership } from './leadership.js';
import type { NodeView, Nodes } from './nodes.js';
import { choose, type Load, NoNodeError, regionPools, SandboxPlacements } from './placement.js';

const view = (id: string, regions: string[], more: Partial<NodeView> = {}): NodeView => ({
  id,
  address: `http://${id}.test:8080`,
  region: regions[0],
  regions,
  cores: 4,
  memoryMb: 8192,
  instances: 0,
  warm: {},
  leads: [],
  epoch: 1,
  startedAt: '',
  heartbeatAt: '',
  healthy: true,
  leased: true,
  stopped: false,
  drained: false,
  ...more,
});

test('the warm pool is preferred among the nodes drawn, while the warm node has room for the sandbox', () => {
  const nodes = [view('a', ['eu'], { warm: { default: 1 } }), view('b', ['eu']), view('c', ['us'])];
  const pools = regionPools(
    nodes,
    (n) => n.regions,
    (n) => n.warm,
  );
  assert.deepEqual([...pools.keys()].sort(), ['eu', 'us']);
  assert.deepEqual(
    pools.get('eu')?.all.map((n) => n.id),
    ['a', 'b'],
  );
  assert.deepEqual(
    pools
      .get('eu')
      ?.warm.get('default')
      ?.map((n) => n.id),
    ['a'],
  );
  assert.equal(pools.get('us')?.warm.size, 0, 'a node reporting no warm sandbox is in no warm list');
  // a is a little busier than b (1 sandbox on 4 cores), but holds a warm sandbox: a create there is an assignment.
  const loads: Record<string, Load> = {
    a: { sandboxes: 1, memoryMb: 1024 },
    b: { sandboxes: 0, memoryMb: 0 },
  };
  const load = (id: string) => loads[id] ?? { sandboxes: 0, memoryMb: 0 };
  const eu = pools.get('eu')!;
  for (let i = 0; i < 20; i++) assert.equal(choose(eu, 'default', 1024, load), 'a');
  // No warm sandbox of that image anywhere: best of two by load (b drawn).
  assert.equal(
    choose(eu, 'sha256:0123456789abcdef', 1024, load, 2, () => 0.9),
    'b',
  );
  // a has no room left for 8 GB more: the warm preference yields to the load.
  assert.equal(
    choose(eu, 'default', 8192, load, 2, () => 0.9),
    'b',
  );
  // Much busier than b (3 sandboxes on 4 cores: 0.75 against 0), a warm node no longer wins: a burst of creates
  // spreads instead of piling on the nodes whose last report said warm.
  loads.a = { sandboxes: 3, memoryMb: 1024 };
  assert.equal(
    choose(eu, 'default', 1024, load, 2, () => 0.9),
    'b',
  );
  // Drawn alone (both draws on a), it is taken.
  assert.equal(
    choose(eu, 'default', 1024, load, 2, () => 0),
    'a',
  );
  assert.equal(choose({ all: [], warm: new Map() }, 'default', 1, load), undefined);
});

async function holderOf(
  list: NodeView[],
  opts: {
    leader?: string;
    aliases?: Record<string, string>;
    holding?: () => boolean;
    volumeNodes?: Record<string, string>;
  } = {},
) {
  const dir = mkdtempSync(join(tmpdir(), 'berth-place-regions-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  const placements = new SandboxPlacements(store);
  await placements.start();
  // Volumes as the volume controller leaves them (`<workspace>/<name>` → the node that made it).
  for (const [k, node] of Object.entries(opts.volumeNodes ?? {})) {
    const [workspace, name] = k.split('/');
    await store.write([
      {
        op: 'create',
        key: { kind: 'Volume', workspace, parent: '', name },
        body: { metadata: { name }, spec: { size: 64 }, status: 'DEPLOYED', node },
      },
    ]);
  }
  const volumeNodes = new VolumeNodes(store);
  await volumeNodes.start();
  const self = list[0];
  const nodes: Nodes = {
    self,
    list: async () => list,
    beat: async () => undefined,
    drain: async () => undefined,
    handOver: async () => undefined,
    close: async () => undefined,
    fence: () => (opts.holding?.() === false ? undefined : { node: self.id, epoch: 1 }),
    refused: () => undefined,
  };
  const leadership: Leadership = {
    lead: async () => undefined,
    leads: () => (opts.leader === self.id ? ['controllers'] : []),
    fence: () => undefined,
    refused: () => undefined,
    close: async () => {},
  };
  const holder = await instanceHolder({
    nodes,
    leadership,
    placements,
    volumeNodes,
    role: 'controllers',
    aliases: opts.aliases,
    warn: () => {},
  });
  return {
    store,
    holder,
    async close() {
      holder.close();
      placements.close();
      volumeNodes.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const sandbox = (region: string | undefined, more: Record<string, unknown> = {}) => ({
  spec: { ...(region ? { region } : {}), runtime: { memory: 512 }, ...more },
});

test('a sandbox is placed on a node of its region only, and refused naming the region when none can take it', async () => {
  const h = await holderOf(
    [
      view('node-eu-1', ['eu-lon-1'], { leads: ['controllers'] }),
      view('node-us-1', ['us-pdx-1']),
      view('node-us-2', ['us-pdx-1', 'us-was-1'], { warm: { default: 2 } }),
      view('node-ap-1', ['ap-sg-1'], { drained: true }),
      view('node-sa-1', ['sa-sp-1'], { healthy: false, leased: false }),
    ],
    { leader: 'node-eu-1', aliases: { 'us-east': 'us-was-1', 'eu-lon-1': 'us-pdx-1' } },
  );
  try {
    for (let i = 0; i < 50; i++) {
      assert.equal(h.holder.place(sandbox('eu-lon-1')), 'node-eu-1', 'a name a node serves is not an alias');
      assert.match(h.holder.place(sandbox('us-pdx-1')), /^node-us-/);
      assert.equal(h.holder.place(sandbox('us-was-1')), 'node-us-2', 'a node serves each of its regions');
      assert.equal(h.holder.place(sandbox('us-east')), 'node-us-2', "this server's alias of a region");
    }
    // The warm node is preferred within the region (it reported a warm sandbox of the default image).
    const us = Array.from({ length: 30 }, () => h.holder.place(sandbox('us-pdx-1')));
    assert.ok(us.every((n) => n === 'node-us-2'));
    assert.deepEqual([...h.holder.regions()].sort(), [
      'ap-sg-1',
      'eu-lon-1',
      'sa-sp-1',
      'us-pdx-1',
      'us-was-1',
    ]);
    const refusal = (body: object) => {
      try {
        h.holder.place(body);
      } catch (err) {
        assert.ok(err instanceof NoNodeError);
        return err;
      }
      assert.fail('placed');
    };
    const drained = refusal(sandbox('ap-sg-1'));
    assert.equal(drained.region, 'ap-sg-1');
    assert.match(
      drained.message,
      /no node of region "ap-sg-1" can take this sandbox now: none of its nodes is healthy/,
    );
    assert.match(refusal(sandbox('sa-sp-1')).message, /region "sa-sp-1"/);
    assert.match(refusal(sandbox('mars-1')).message, /region "mars-1" .*no node of the cluster serves it/);
    // What runs on the leader (volumes) is refused in another region, not moved; a sandbox on an image is drawn in its
    // region like any other (decision 081).
    assert.match(
      refusal(sandbox('us-pdx-1', { volumes: [{ name: 'v', mountPath: '/data' }] })).message,
      /region "us-pdx-1".*node leading the controllers/,
    );
    assert.equal(
      h.holder.place(sandbox('eu-lon-1', { volumes: [{ name: 'v', mountPath: '/d' }] })),
      'node-eu-1',
    );
    assert.match(h.holder.place(sandbox('us-pdx-1', { runtime: { image: 'local/app:1' } })), /^node-us-/);
    // A refusal tells the caller its region only: no node's id, address, load or what else runs there.
    for (const r of ['ap-sg-1', 'sa-sp-1', 'mars-1'])
      assert.doesNotMatch(refusal(sandbox(r)).message, /node-|\.test|\d+ sandbox|memory/);
    // No region (a sandbox made before regions were placed): any node.
    assert.match(h.holder.place(sandbox(undefined)), /^node-(eu|us)-/);
  } finally {
    await h.close();
  }
});

test('a sandbox mounting volumes goes to the node holding their data, or waits for it; never another node', async () => {
  const list = [
    view('node-a', ['eu'], { leads: ['controllers'] }),
    view('node-b', ['eu']),
    view('node-c', ['eu'], { healthy: false, leased: false }),
    view('node-d', ['eu'], { drained: true }),
    view('node-e', ['us']),
  ];
  const h = await holderOf(list, {
    leader: 'node-a',
    volumeNodes: { 'ws/on-b': 'node-b', 'ws/on-c': 'node-c', 'ws/on-d': 'node-d', 'ws/on-e': 'node-e' },
  });
  try {
    const mounting = (...names: string[]) =>
      sandbox('eu', { volumes: names.map((name) => ({ name, mountPath: `/${name}` })) });
    // On node-b, whatever the loads: the data is there.
    for (let i = 0; i < 10; i++) assert.equal(h.holder.place(mounting('on-b'), 'ws'), 'node-b');
    // A volume not made yet (its node not recorded): with the leader, which makes it.
    assert.equal(h.holder.place(mounting('new'), 'ws'), 'node-a');
    assert.equal(h.holder.place(mounting('on-b', 'new'), 'ws'), 'node-b');
    // Another workspace's volume of the same name is not this one's.
    assert.equal(h.holder.place(mounting('on-b'), 'other'), 'node-a');
    const refused = (body: unknown, why: RegExp) =>
      assert.throws(
        () => h.holder.place(body as never, 'ws'),
        (e: unknown) => e instanceof NoNodeError && why.test(e.message),
      );
    refused(mounting('on-c'), /its volumes are on node node-c, which is not answering/);
    refused(mounting('on-d'), /its volumes are on node node-d, which is drained/);
    refused(mounting('on-b', 'on-c'), /its volumes are on different nodes \(node-b, node-c\)/);
    refused(mounting('on-e'), /region "eu".*its volumes are on node node-e, which is of another region/);
  } finally {
    await h.close();
  }
});

test('a sandbox may name a region another node of the cluster serves; one no node serves is a 422 listing them', async () => {
  const h = await holderOf([view('node-eu-1', ['eu-lon-1']), view('node-us-1', ['us-pdx-1'])]);
  const dir = mkdtempSync(join(tmpdir(), 'berth-place-validate-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  try {
    // This server serves eu-lon-1 only (its BERTH_REGIONS); the cluster's nodes serve us-pdx-1 too.
    const resources = new Resources(store, KINDS, new SecretBox(randomBytes(32)), {
      regions: ['eu-lon-1'],
      nodeRegions: () => h.holder.regions(),
    });
    const ctx = { workspace: 'ws', parents: [], actor: 'tester' };
    const kd = resources.kind('Sandbox');
    const made = await resources.create(kd, ctx, {
      metadata: { name: 'west' },
      spec: { region: 'us-pdx-1' },
    });
    assert.equal(made.object.body.spec.region, 'us-pdx-1');
    await assert.rejects(
      resources.create(kd, ctx, { metadata: { name: 'nowhere' }, spec: { region: 'mars-1' } }),
      (e: any) => e.status === 422 && /mars-1.*eu-lon-1, us-pdx-1/.test(JSON.stringify(e.toProblem())),
    );
    // Other kinds run where the controllers run: a region only another node serves stays refused for them.
    await assert.rejects(
      resources.create(resources.kind('Volume'), ctx, {
        metadata: { name: 'vol' },
        spec: { region: 'us-pdx-1', size: 64 },
      }),
      (e: any) => e.status === 422,
    );
  } finally {
    await h.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("an agent's requests go to a node serving a replica of it; its slots stay on live nodes of its region", async () => {
  const key = 'Agent/ws/a1';
  const h = await holderOf(
    [
      view('a', ['eu'], { leads: ['controllers'] }),
      view('b', ['eu'], { serving: [key] }),
      view('c', ['eu']),
      view('d', ['eu'], { healthy: false, leased: false, serving: [key] }),
      view('e', ['eu'], { serving: [key] }),
      view('f', ['us'], { drained: true }),
    ],
    { leader: 'a' },
  );
  const none = { has: () => false };
  const peer = (d: unknown) => (d && typeof d === 'object' && 'peer' in d ? (d.peer as URL).hostname : d);
  try {
    // A node of its slots that serves it, else one that holds a slot (it scales from zero there).
    for (let i = 0; i < 10; i++)
      assert.equal(peer(h.holder.decideReplica(key, ['b', 'c'], false, none)), 'b.test');
    const refusedB = { has: (o: string) => o === 'http://b.test:8080' };
    assert.equal(peer(h.holder.decideReplica(key, ['b', 'c'], false, refusedB)), 'c.test');
    // Its own live replica first; a slot here without one is served here too.
    assert.deepEqual(h.holder.decideReplica(key, ['b'], true, none), { here: true });
    assert.deepEqual(h.holder.decideReplica(key, ['a'], false, none), { here: true });
    // Not placed: the leader's, as before.
    assert.equal(h.holder.decideReplica(key, [], false, none), undefined);
    // Its only slot on a dead node: another node still serving it answers.
    assert.equal(peer(h.holder.decideReplica(key, ['d'], false, none)), 'b.test');
    // A thread or session keeps its node, the same on every call.
    const first = peer(h.holder.decideReplica(key, ['b', 'e'], false, none, 'thread-1'));
    for (let i = 0; i < 10; i++)
      assert.equal(peer(h.holder.decideReplica(key, ['b', 'e'], false, none, 'thread-1')), first);
    // Slots stay on live, undrained nodes of the region; candidates are those, the leader's app built.
    const body = { spec: { region: 'eu' } };
    assert.ok(h.holder.keepsReplica('b', body));
    assert.ok(!h.holder.keepsReplica('d', body));
    assert.ok(!h.holder.keepsReplica('f', { spec: { region: 'us' } }));
    assert.ok(!h.holder.keepsReplica('b', { spec: { region: 'us' } }));
    const cands = h.holder.replicaCandidates(body, key);
    assert.deepEqual(cands.map((c) => c.id).sort(), ['a', 'b', 'c', 'e']);
    assert.deepEqual(
      cands
        .filter((c) => c.built)
        .map((c) => c.id)
        .sort(),
      ['a', 'b', 'e'],
    );
    assert.deepEqual(h.holder.replicaCandidates({ spec: { region: 'us' } }, key), []);
  } finally {
    await h.close();
  }
});

test("a job task's attempt goes to a healthy, undrained node of its job's region with room, the least loaded", async () => {
  const h = await holderOf([
    view('node-eu-1', ['eu-lon-1']),
    view('node-eu-2', ['eu-lon-1']),
    view('node-us-1', ['us-pdx-1']),
    view('node-eu-3', ['eu-lon-1'], { drained: true }),
    view('node-eu-4', ['eu-lon-1'], { healthy: false, leased: false }),
  ]);
  try {
    const none = () => ({ sandboxes: 0, memoryMb: 0 });
    const any = () => true;
    for (let i = 0; i < 50; i++) {
      assert.match(h.holder.placeTask('eu-lon-1', none, any) ?? '', /^node-eu-[12]$/);
      assert.equal(h.holder.placeTask('us-pdx-1', none, any), 'node-us-1');
      // The tasks placed count in a node's load: node-eu-1 running 8 on 4 cores is passed over for node-eu-2.
      const busy = (n: string) => (n === 'node-eu-1' ? { sandboxes: 8, memoryMb: 4096 } : none());
      assert.equal(h.holder.placeTask('eu-lon-1', busy, any), 'node-eu-2');
      // A node at its task cap is left out; none left: undefined (the task waits).
      assert.equal(
        h.holder.placeTask('eu-lon-1', none, (n) => n !== 'node-eu-2'),
        'node-eu-1',
      );
    }
    assert.equal(
      h.holder.placeTask('eu-lon-1', none, () => false),
      undefined,
    );
    assert.equal(h.holder.placeTask('ap-sg-1', none, any), undefined);
    // Without a region (a job made before regions), any node.
    assert.match(h.holder.placeTask(undefined, none, any) ?? '', /^node-(eu-[12]|us-1)$/);
    assert.equal(h.holder.taskNodes(), 3);
    // The attempts of a node whose lease lapsed are lost; a drained node's run on.
    assert.equal(h.holder.lapsed('node-eu-4'), true);
    assert.equal(h.holder.lapsed('node-gone'), true);
    assert.equal(h.holder.lapsed('node-eu-3'), false);
    assert.equal(h.holder.lapsed('node-eu-1'), false);
  } finally {
    await h.close();
  }
});

test('a node judges its own lease by its renewals, not by the list it read last', async () => {
  let holding = true;
  // The list read last says this node's lease lapsed (its beat was late, say): it holds it all the same.
  const h = await holderOf(
    [view('node-self', ['eu-lon-1'], { healthy: false, leased: false }), view('node-b', ['eu-lon-1'])],
    { leader: 'node-self', holding: () => holding },
  );
  try {
    assert.equal(h.holder.lapsed('node-self'), false, 'its own attempts are not taken for lost');
    holding = false;
    assert.equal(h.holder.lapsed('node-self'), true, 'once its own renewals stopped, they are');
    assert.equal(h.holder.lapsed('node-b'), false);
  } finally {
    await h.close();
  }
});
