// An agent's replicas counted and listed over a cluster's nodes (docs/decisions/092-cluster-wide-counts.md): this
// server's, named by its node, then the other nodes' as published; a replica kept in standby is listed, not counted;
// on one server nothing names a node.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Replica } from '../controllers/workload/replicas.js';
import { type ListedReplica, localReplicas, replicaCount } from './workload-replicas.js';

const replica = (id: string, more: Partial<Replica> = {}): Replica =>
  ({ id, revision: 'r1', info: {}, inflight: 0, lastUsedMs: 0, gone: false, ...more }) as Replica;

const set = (list: Replica[]) => ({
  get: (ws: string, _kind: string, name: string) =>
    ws === 'tenant-a' && name === 'ag' ? ({ replicas: list } as any) : undefined,
});

describe('replicas over nodes', () => {
  const here = set([replica('a1'), replica('a2', { gone: true })]);
  const remote: ListedReplica[] = [
    {
      id: 'b1',
      revision: 'r1',
      role: 'active',
      inflight: 1,
      lastUsedAt: new Date(0).toISOString(),
      node: 'node-b',
    },
    {
      id: 'b2',
      revision: 'r1',
      role: 'active',
      inflight: 0,
      lastUsedAt: new Date(0).toISOString(),
      node: 'node-b',
      standbyUntil: new Date(1).toISOString(),
    },
  ];
  const elsewhere = (_kind: string, ws: string, name: string) =>
    ws === 'tenant-a' && name === 'ag' ? remote : [];

  test("the count adds the other nodes' serving replicas; standby ones are not counted", () => {
    const view: Record<string, any> = { metadata: { name: 'ag' } };
    replicaCount({ replicas: here, self: 'node-a', elsewhere })('Agent', 'tenant-a', view);
    assert.equal(view.replicas, 2);
  });

  test("another workspace's agent of the same name counts none of them", () => {
    const view: Record<string, any> = { metadata: { name: 'ag' } };
    replicaCount({ replicas: here, self: 'node-a', elsewhere })('Agent', 'tenant-b', view);
    assert.equal(view.replicas, 0);
  });

  test('on one server: its replicas, no node named', () => {
    const view: Record<string, any> = { metadata: { name: 'ag' } };
    replicaCount({ replicas: here })('Agent', 'tenant-a', view);
    assert.equal(view.replicas, 1);
    const [only] = localReplicas(here, 'tenant-a', 'Agent', 'ag');
    assert.equal(only.id, 'a1');
    assert.equal(only.node, undefined);
  });
});
