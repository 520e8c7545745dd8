// Best of two by load, least loaded of all (job tasks), and the placement index every server keeps from the change feed (placement.ts).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { SqliteStore } from '../store/sqlite.js';
import {
  bestOf,
  DEFAULT_WARM_KEY,
  type Load,
  leastLoaded,
  SandboxPlacements,
  volumeNamesOf,
  warmKeyOf,
} from './placement.js';

const nodes = [
  { id: 'a', cores: 2, memoryMb: 4096 },
  { id: 'b', cores: 8, memoryMb: 4096 },
];

test('best of two takes the less loaded of the two drawn, by sandboxes per core or memory, whichever is busier', () => {
  // Draws a then b.
  const draws = [0, 0.9];
  const random = () => draws.shift() ?? 0;
  const loads: Record<string, Load> = { a: { sandboxes: 2, memoryMb: 0 }, b: { sandboxes: 4, memoryMb: 0 } };
  // a: 2 per 2 cores = 1; b: 4 per 8 cores = 0.5.
  assert.equal(
    bestOf(nodes, (id) => loads[id], 2, random),
    'b',
  );
  // Memory is the busier resource of b now.
  loads.b = { sandboxes: 0, memoryMb: 4096 };
  draws.push(0, 0.9);
  assert.equal(
    bestOf(nodes, (id) => loads[id], 2, random),
    'a',
  );
  assert.equal(
    bestOf([], () => loads.a),
    undefined,
  );
  assert.equal(
    bestOf([nodes[0]], () => loads.a),
    'a',
  );
});

test('the index follows each sandbox to its node, counts its load, and forgets it once TERMINATED or deleted', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-placement-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  try {
    const key = (name: string, workspace = 'default') => ({ kind: 'Sandbox', workspace, parent: '', name });
    const body = (node: string | undefined, status = 'DEPLOYED') => ({
      metadata: {},
      spec: { runtime: { memory: 512 } },
      status,
      ...(node ? { node } : {}),
    });
    await store.write([{ op: 'create', key: key('one'), body: body('a') }]);
    const p = new SandboxPlacements(store);
    await p.start();
    await store.write([
      { op: 'create', key: key('two'), body: body('a') },
      { op: 'create', key: key('two', 'other'), body: body('b') },
      { op: 'create', key: key('old'), body: body(undefined) },
    ]);
    assert.equal(p.nodeOf('default', 'two'), 'a');
    assert.equal(p.nodeOf('other', 'two'), 'b', 'keyed by workspace');
    assert.equal(p.nodeOf('default', 'old'), undefined);
    assert.deepEqual(p.load('a'), { sandboxes: 2, memoryMb: 1024 });
    assert.deepEqual([...p.placed()].sort(), [
      ['default', 'old', ''],
      ['default', 'one', 'a'],
      ['default', 'two', 'a'],
      ['other', 'two', 'b'],
    ]);
    await store.write([{ op: 'update', key: key('two'), body: body('b') }]);
    assert.deepEqual(p.load('a'), { sandboxes: 1, memoryMb: 512 });
    assert.deepEqual(p.load('b'), { sandboxes: 2, memoryMb: 1024 });
    await store.write([
      { op: 'update', key: key('one'), body: body('a', 'TERMINATED') },
      { op: 'delete', key: key('two', 'other') },
    ]);
    assert.deepEqual(p.load('a'), { sandboxes: 0, memoryMb: 0 });
    assert.deepEqual(p.load('b'), { sandboxes: 1, memoryMb: 512 });
    assert.equal(p.nodeOf('default', 'one'), undefined);
    p.close();
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a sandbox mounting volumes is not drawn (they name its node); an image is drawn like the default one', () => {
  const none = (body: Parameters<typeof volumeNamesOf>[0]) => volumeNamesOf(body).length === 0;
  assert.ok(none({ spec: { runtime: { image: 'blaxel/base-image:latest' } } }));
  assert.ok(none({ spec: {} }), 'no image: the default one');
  assert.ok(none({ spec: { runtime: { image: 'docker.io/blaxel/base-image:latest' } } }));
  assert.deepEqual(
    volumeNamesOf({
      spec: {
        volumes: [
          { name: 'v', mountPath: '/data' },
          { name: 'v', mountPath: '/again' },
          { name: 'w', mountPath: '/w' },
        ],
      },
    }),
    ['v', 'w'],
  );
  // Its node gets the image from the leader before it starts (decision 081).
  assert.ok(none({ spec: { runtime: { image: 'local/app:1' } } }));
  assert.ok(none({ spec: { runtime: { image: 'python:3.12-slim' } } }));
  assert.equal(warmKeyOf({ spec: {} }), DEFAULT_WARM_KEY);
  assert.equal(warmKeyOf({ spec: { runtime: { image: 'local/app:1' } } }), '', 'no pool is keyed by a name');
});

test('least loaded takes the lowest load of every candidate, drawing among ties', () => {
  const three = [
    { id: 'a', cores: 2, memoryMb: 4096 },
    { id: 'b', cores: 2, memoryMb: 4096 },
    { id: 'c', cores: 2, memoryMb: 4096 },
  ];
  const loads: Record<string, Load> = {
    a: { sandboxes: 2, memoryMb: 0 },
    b: { sandboxes: 1, memoryMb: 0 },
    c: { sandboxes: 1, memoryMb: 3072 },
  };
  const load = (id: string) => loads[id];
  // b and c have one instance each, but c asks three quarters of its memory: b, whatever is drawn.
  for (const r of [0, 0.5, 0.99])
    assert.equal(
      leastLoaded(three, load, () => r),
      'b',
    );
  const idle = () => ({ sandboxes: 0, memoryMb: 0 });
  assert.equal(
    leastLoaded(three, idle, () => 0),
    'c',
    'a tie drawn low takes the later candidate',
  );
  assert.equal(
    leastLoaded(three, idle, () => 0.99),
    'a',
    'a tie drawn high keeps the first',
  );
  assert.equal(leastLoaded([], idle), undefined);
});
