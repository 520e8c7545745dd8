// Thread stickiness and MCP session affinity as pure decisions over hand-built workloads, with the clock passed in:
// a thread keeps its revision and replica through a canary split, moves only when its replica or revision goes,
// and is forgotten after the TTL; an MCP session whose replica is gone answers 404.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Replica, Workload } from '../controllers/workload/replicas.js';
import { ApiError } from '../errors.js';
import { Affinity, DEFAULT_STICKY_TTL_S, MCP_SESSION_TTL_MS } from './affinity.js';
import { ExpiringLru } from './expiring-lru.js';

const replica = (id: string, revision: string): Replica =>
  ({ id, revision, inflight: 0, lastUsedMs: 0, gone: false }) as unknown as Replica;

function workload(rev: string, canary?: { rev: string; percent: number }, stickyTtlS?: number): Workload {
  const mk = (r: string, key: string): Workload => ({
    key,
    workspace: 'ws',
    kind: 'Agent',
    name: 'a',
    run: { id: r } as Workload['run'],
    public: false,
    route: { stickyTtlS },
    replicas: [replica(`${r}-1`, r), replica(`${r}-2`, r)],
    extraStarts: 0,
    waiting: 0,
    seq: 0,
  });
  const w = mk(rev, 'ws/Agent/a');
  if (canary) w.canary = { w: mk(canary.rev, 'ws/Agent/a#canary'), percent: canary.percent };
  return w;
}

/** The gateway's free choice, made deterministic: alternate the revisions on every draw. */
function alternating() {
  let n = 0;
  return (w: Workload) => (n++ % 2 && w.canary ? w.canary.w : w);
}

test('a thread stays on its first revision and replica through a 50/50 canary split', () => {
  let now = 0;
  const aff = new Affinity(() => now);
  const w = workload('v1', { rev: 'v2', percent: 50 });
  const draw = alternating();
  const first = aff.route(w, { 'x-service-thread-id': 't1' }, draw);
  const r = first.replica ?? first.w.replicas[1];
  first.pin?.(r);
  for (let i = 0; i < 20; i++) {
    now += 1000;
    const next = aff.route(w, { 'x-service-thread-id': 't1' }, draw);
    assert.equal(next.w, first.w, 'same revision');
    assert.equal(next.replica, r, 'same replica');
  }
  // Without a thread the draw decides each time.
  const free = [0, 1, 2, 3].map(() => aff.route(w, {}, draw).w.run.id);
  assert.deepEqual(new Set(free).size, 2);
});

test('the SDK header and the bare Thread-Id header pin threads too, each its own', () => {
  const aff = new Affinity(() => 0);
  const w = workload('v1', { rev: 'v2', percent: 50 });
  const draw = alternating();
  const a = aff.route(w, { 'x-blaxel-thread-id': 'a' }, draw);
  a.pin?.(a.w.replicas[0]);
  const b = aff.route(w, { 'thread-id': 'b' }, draw);
  b.pin?.(b.w.replicas[0]);
  assert.notEqual(a.w, b.w);
  assert.equal(aff.route(w, { 'x-blaxel-thread-id': 'a' }, draw).w, a.w);
  assert.equal(aff.route(w, { 'thread-id': 'b' }, draw).w, b.w);
});

test('a pin expires stickySessionTtl seconds after its last use, and each use restarts the TTL', () => {
  let now = 0;
  const aff = new Affinity(() => now);
  const w = workload('v1', { rev: 'v2', percent: 50 }, 10);
  const draw = alternating();
  const first = aff.route(w, { 'thread-id': 't' }, draw);
  first.pin?.(first.w.replicas[0]);
  now = 9_000;
  assert.equal(aff.route(w, { 'thread-id': 't' }, draw).replica, first.w.replicas[0]);
  now = 18_000; // 9 s after the last use: still pinned
  assert.equal(aff.route(w, { 'thread-id': 't' }, draw).replica, first.w.replicas[0]);
  now = 28_001; // past 10 s since the last use: drawn afresh
  const again = aff.route(w, { 'thread-id': 't' }, draw);
  assert.equal(again.replica, undefined);
  assert.ok(again.pin);
});

test('stickySessionTtl 0 turns stickiness off; unset means the documented default', () => {
  let now = 0;
  const off = new Affinity(() => now);
  const w0 = workload('v1', undefined, 0);
  const r0 = off.route(w0, { 'thread-id': 't' }, (x) => x);
  assert.equal(r0.pin, undefined);
  const on = new Affinity(() => now);
  const w = workload('v1');
  const r = on.route(w, { 'thread-id': 't' }, (x) => x);
  r.pin?.(w.replicas[1]);
  now = DEFAULT_STICKY_TTL_S * 1000 - 1;
  assert.equal(on.route(w, { 'thread-id': 't' }, (x) => x).replica, w.replicas[1]);
});

test('a pinned replica that is gone hands the thread to another of the same revision', () => {
  const aff = new Affinity(() => 0);
  const w = workload('v1', { rev: 'v2', percent: 50 });
  const draw = alternating();
  draw(w); // the next draw is the canary
  const first = aff.route(w, { 'thread-id': 't' }, draw);
  assert.equal(first.w.run.id, 'v2');
  first.pin?.(first.w.replicas[0]);
  first.w.replicas[0].gone = true;
  const moved = aff.route(w, { 'thread-id': 't' }, () => assert.fail('a pinned thread is never re-drawn'));
  assert.equal(moved.w.run.id, 'v2', 'same revision');
  assert.equal(moved.replica, undefined, 'a new replica is picked');
  moved.pin?.(moved.w.replicas[1]);
  assert.equal(aff.route(w, { 'thread-id': 't' }, draw).replica, moved.w.replicas[1]);
});

test('a thread whose revision was rolled away goes to the active revision', () => {
  const aff = new Affinity(() => 0);
  const w = workload('v1', { rev: 'v2', percent: 50 });
  const draw = alternating();
  draw(w);
  const first = aff.route(w, { 'thread-id': 't' }, draw);
  first.pin?.(first.w.replicas[0]);
  assert.equal(first.w.run.id, 'v2');
  w.canary = undefined; // the canary removed: its replicas are gone
  first.w.replicas[0].gone = true;
  const moved = aff.route(w, { 'thread-id': 't' }, draw);
  assert.equal(moved.w, w);
  assert.equal(moved.replica, undefined);
});

test('an MCP session stays on the replica that issued it; once that replica is gone it answers 404', () => {
  let now = 0;
  const aff = new Affinity(() => now);
  const w = workload('v1');
  const issuer = w.replicas[1];
  aff.answered(w, issuer, 'POST', 200, { 'mcp-session-id': 's1' });
  for (let i = 0; i < 5; i++)
    assert.equal(aff.route(w, { 'mcp-session-id': 's1' }, (x) => x).replica, issuer);
  // An id the gateway never saw is routed freely: the server itself says whether it knows it.
  assert.equal(aff.route(w, { 'mcp-session-id': 'other' }, (x) => x).replica, undefined);
  issuer.gone = true;
  assert.throws(
    () => aff.route(w, { 'mcp-session-id': 's1' }, (x) => x),
    (e: unknown) => e instanceof ApiError && e.status === 404 && /start a new session/.test(e.message),
  );
  // A session idle past its TTL is forgotten, and one the server ended with DELETE too.
  const live = w.replicas[0];
  aff.answered(w, live, 'POST', 200, { 'mcp-session-id': 's2' });
  aff.answered(w, live, 'DELETE', 200, { 'mcp-session-id': 's2' });
  assert.equal(aff.route(w, { 'mcp-session-id': 's2' }, (x) => x).replica, undefined);
  aff.answered(w, live, 'POST', 200, { 'mcp-session-id': 's3' });
  now += MCP_SESSION_TTL_MS;
  assert.equal(aff.route(w, { 'mcp-session-id': 's3' }, (x) => x).replica, undefined);
});

test('the pin map is bounded: past its size the least recently used entry goes', () => {
  let now = 0;
  const m = new ExpiringLru<string, number>(3, () => now);
  m.set('a', 1, 1000);
  m.set('b', 2, 1000);
  m.set('c', 3, 1000);
  assert.equal(m.get('a', 1000), 1); // a is now the most recently used
  m.set('d', 4, 1000);
  assert.equal(m.size, 3);
  assert.equal(m.get('b', 1000), undefined, 'b was the least recently used');
  assert.equal(m.get('a', 1000), 1);
  now = 5000;
  assert.equal(m.get('c', 1000), undefined, 'expired');
  const aff = new Affinity(() => 0, 2);
  const w = workload('v1');
  for (const t of ['x', 'y', 'z']) aff.route(w, { 'thread-id': t }, (v) => v).pin?.(w.replicas[0]);
  assert.equal(aff.route(w, { 'thread-id': 'x' }, (v) => v).replica, undefined, 'x was pushed out');
  assert.equal(aff.route(w, { 'thread-id': 'z' }, (v) => v).replica, w.replicas[0]);
});

test('a session whose replica was just found dead is told it ended (404); other requests are not', () => {
  const aff = new Affinity(() => 0);
  const w = workload('v1');
  const r = w.replicas[0];
  aff.answered(w, r, 'POST', 200, { 'mcp-session-id': 's1' });
  assert.equal(aff.ended(w, { 'mcp-session-id': 's1' }), undefined, 'its replica is alive');
  r.gone = true;
  assert.equal(aff.ended(w, { 'thread-id': 't' }), undefined);
  const e = aff.ended(w, { 'mcp-session-id': 's1' });
  assert.ok(e instanceof ApiError && e.status === 404);
  // Every request of that session is told, not the first alone (its SSE GET and next POST race), until the TTL.
  for (let i = 0; i < 3; i++) {
    assert.ok(aff.ended(w, { 'mcp-session-id': 's1' }) instanceof ApiError);
    assert.throws(() => aff.route(w, { 'mcp-session-id': 's1' }, (x) => x), /start a new session/);
  }
});
