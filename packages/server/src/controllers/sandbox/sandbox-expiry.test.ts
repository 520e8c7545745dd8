// Which sandboxes are due, at a given instant: the pure half of the expiry sweeper.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { StoredObject } from '../../store/store.js';
import { duePreviews, dueSandboxes } from './sandbox-expiry.js';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const at = (ms: number) => new Date(T0 + ms).toISOString();

function box(name: string, spec: any, extra: Record<string, unknown> = {}): StoredObject {
  return {
    kind: 'Sandbox',
    workspace: 'default',
    parent: '',
    name,
    resourceVersion: 1,
    body: { metadata: { name, createdAt: at(0) }, spec, status: 'DEPLOYED', ...extra },
  };
}

const names = (xs: StoredObject[]) => xs.map((o) => o.name).sort();

test('runtime.ttl, runtime.expires and ttl-max-age count from creation or the given date', () => {
  const all = [
    box('ttl', { runtime: { ttl: '10s' } }),
    box('expires', { runtime: { expires: at(20_000) } }),
    box('max-age', {
      lifecycle: { expirationPolicies: [{ type: 'ttl-max-age', value: '30s', action: 'delete' }] },
    }),
    box('date', {
      lifecycle: { expirationPolicies: [{ type: 'date', value: at(40_000), action: 'delete' }] },
    }),
    box('forever', { runtime: {} }),
  ];
  assert.deepEqual(names(dueSandboxes(all, T0 + 9_999)), []);
  assert.deepEqual(names(dueSandboxes(all, T0 + 10_000)), ['ttl']);
  assert.deepEqual(names(dueSandboxes(all, T0 + 20_000)), ['expires', 'ttl']);
  assert.deepEqual(names(dueSandboxes(all, T0 + 40_000)), ['date', 'expires', 'max-age', 'ttl']);
  assert.deepEqual(names(dueSandboxes(all, T0 + 10 ** 9)), ['date', 'expires', 'max-age', 'ttl']);
});

test('ttl-idle counts from the last use, the gateway’s own clock winning over a staler store', () => {
  const idle = { lifecycle: { expirationPolicies: [{ type: 'ttl-idle', value: '1m', action: 'delete' }] } };
  const used = box('used', idle, { lastUsedAt: at(50_000) });
  const never = box('never', idle);
  assert.deepEqual(names(dueSandboxes([used, never], T0 + 60_000)), ['never']);
  assert.deepEqual(names(dueSandboxes([used, never], T0 + 110_000)), ['never', 'used']);
  const seenLater = () => T0 + 100_000;
  assert.deepEqual(names(dueSandboxes([used, never], T0 + 110_000, seenLater)), []);
});

test('sandboxes already on their way out are left alone', () => {
  const spec = { runtime: { ttl: '1s' } };
  const deleting = box('deleting', spec, { status: 'DELETING' });
  const terminated = box('terminated', spec, { status: 'TERMINATED' });
  assert.deepEqual(dueSandboxes([deleting, terminated], T0 + 60_000), []);
});

test('previews are due at the earlier of their ttl (from creation) and expires, and only then', () => {
  const preview = (name: string, spec: any, status = 'DEPLOYED'): StoredObject => ({
    ...box(name, spec, { status }),
    kind: 'Preview',
    parent: 'box',
  });
  const all = [
    preview('ttl', { port: 3000, ttl: '1m' }),
    preview('date', { port: 3000, expires: at(30_000) }),
    preview('both', { port: 3000, ttl: '1h', expires: at(45_000) }),
    preview('forever', { port: 3000 }),
    preview('going', { port: 3000, ttl: '1s' }, 'DELETING'),
  ];
  assert.deepEqual(names(duePreviews(all, T0 + 29_000)), []);
  assert.deepEqual(names(duePreviews(all, T0 + 30_000)), ['date']);
  assert.deepEqual(names(duePreviews(all, T0 + 50_000)), ['both', 'date']);
  assert.deepEqual(names(duePreviews(all, T0 + 3_600_000)), ['both', 'date', 'ttl']);
});
