// The choice of nodes for an agent's replica slots (docs/decisions/086-replicas-across-nodes.md): spread over nodes
// first, a node with the app built next, the least loaded last; slots on nodes that must be left move, extra ones go.
import assert from 'node:assert/strict';
import { APPLICATION_MAX_SCALE } from '../kinds/application.js';
import { describe, it } from 'node:test';
import type { StoredObject } from '../store/store.js';
import { placeable, placeSlots, type ReplicaCandidate, shareOf, slotsOf } from './replica-placements.js';

const node = (id: string, o: Partial<ReplicaCandidate> = {}): ReplicaCandidate => ({
  id,
  cores: 4,
  sandboxes: 0,
  built: false,
  ...o,
});
const obj = (body: any, kind = 'Agent'): StoredObject =>
  ({ kind, workspace: 'ws', name: 'a', body }) as unknown as StoredObject;

describe('replica slots', () => {
  const none = () => 0;
  const all = () => true;

  it('spreads the slots of one workload over different nodes before doubling up', () => {
    const c = [node('a'), node('b'), node('c')];
    const two = placeSlots([], 2, all, c, none);
    assert.equal(new Set(two).size, 2);
    const four = placeSlots([], 4, all, c, none);
    assert.equal(new Set(four).size, 3);
  });

  it('prefers a node with the app built, then the least loaded', () => {
    const c = [node('a', { sandboxes: 1 }), node('b', { built: true, sandboxes: 8 }), node('c')];
    assert.deepEqual(placeSlots([], 1, all, c, none), ['b']);
    assert.deepEqual(placeSlots([], 2, all, c, none), ['b', 'c']);
    const slots = (n: string) => (n === 'c' ? 9 : 0);
    assert.deepEqual(placeSlots([], 2, all, c, slots), ['b', 'a']);
  });

  it('keeps usable slots, moves those on nodes to leave, drops extras, and returns the same list when done', () => {
    const c = [node('a'), node('b'), node('c')];
    const cur = ['a', 'b'];
    assert.equal(placeSlots(cur, 2, all, c, none), cur);
    assert.deepEqual(
      placeSlots(
        cur,
        2,
        (n) => n !== 'b',
        c.filter((x) => x.id !== 'b'),
        none,
      ),
      ['a', 'c'],
    );
    assert.deepEqual(placeSlots(['a', 'b', 'c'], 1, all, c, none), ['a']);
    // Nowhere to go: what is usable stays.
    assert.deepEqual(
      placeSlots(cur, 2, (n) => n === 'a', [], none),
      ['a'],
    );
  });

  it("gives each node its share of the workload's scale", () => {
    const o = obj({ replicaNodes: ['a', 'b', 'a'], spec: { runtime: { minScale: 3, maxScale: 10 } } });
    assert.equal(slotsOf(o), 3);
    assert.deepEqual(shareOf(o, 'a'), { minScale: 2, maxScale: 7 });
    assert.deepEqual(shareOf(o, 'b'), { minScale: 1, maxScale: 4 });
    assert.equal(shareOf(o, 'c'), undefined);
    const zero = obj({ replicaNodes: ['a'], spec: { runtime: { minScale: 0, maxScale: 5 } } });
    assert.equal(slotsOf(zero), 1);
    assert.deepEqual(shareOf(zero, 'a'), { minScale: 0, maxScale: 5 });
    // An application always runs one replica, up to its fixed maximum.
    const app = obj({ replicaNodes: ['b'], spec: { image: 'x' } }, 'Application');
    assert.equal(slotsOf(app), 1);
    assert.deepEqual(shareOf(app, 'b'), { minScale: 1, maxScale: APPLICATION_MAX_SCALE });
  });

  it('places agents and functions without volumes or connections, and applications running an image', () => {
    assert.ok(placeable(obj({ spec: {} })));
    assert.ok(placeable(obj({ spec: {} }, 'Function')));
    assert.ok(placeable(obj({ spec: { image: 'local/web:1' } }, 'Application')));
    assert.ok(
      !placeable(
        obj(
          { spec: { extensions: { 'ai.blaxel.experimental/bind-to-sandbox': { sandbox: 's' } } } },
          'Application',
        ),
      ),
      'bound to a sandbox: nothing runs',
    );
    assert.ok(!placeable(obj({ spec: {} }, 'Sandbox')));
    assert.ok(!placeable(obj({ spec: { volumes: [{ name: 'v' }] } })));
    assert.ok(
      placeable(obj({ spec: { integrationConnections: ['c'] } })),
      'connections move with the replicas (decision 101)',
    );
  });
});
