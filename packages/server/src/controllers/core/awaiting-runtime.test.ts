// The reconciler of kinds whose runtime is not in this build, over a real store and resource pipeline
// with a kind made for the test (so it keeps testing this code after every real kind gets a runtime).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Type } from '../../kinds/typebox.js';
import pino from 'pino';
import { SecretBox } from '../../crypto/secret-box.js';
import type { KindDescriptor } from '../../kinds/types.js';
import { Resources } from '../../store/resources.js';
import { SqliteStore } from '../../store/sqlite.js';
import { startControllers } from './index.js';
import { WAITING_FOR_RUNTIME } from './lifecycle.js';

const gizmo: KindDescriptor = {
  kind: 'Gizmo',
  plural: 'gizmos',
  path: '/gizmos',
  nameParam: 'gizmoName',
  description: 'a kind with status and no runtime',
  spec: Type.Object({ enabled: Type.Optional(Type.Boolean()), size: Type.Optional(Type.Integer()) }),
  hasStatus: true,
};

async function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'berth-awaiting-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  const resources = new Resources(store, [gizmo], new SecretBox(randomBytes(32)), { regions: ['local'] });
  const controllers = startControllers({ resources, logger: pino({ level: 'silent' }) });
  const ctx = { workspace: 'default', parents: [], actor: 'test' };
  const key = (name: string) => ({ kind: 'Gizmo', workspace: 'default', parent: '', name });
  return {
    put: (name: string, spec: object) => resources.replace(gizmo, ctx, name, { metadata: { name }, spec }),
    del: (name: string) => resources.delete(gizmo, ctx, name),
    get: async (name: string): Promise<any> => (await store.get(key(name)))?.body,
    async close() {
      await controllers.stop();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function until<T>(f: () => Promise<T>, pred: (v: T) => boolean): Promise<T> {
  for (let i = 0; i < 2000; i++) {
    const v = await f();
    if (pred(v)) return v;
    await new Promise((r) => setTimeout(r, 2));
  }
  assert.fail('condition not reached');
}

const waiting = (b: any) => b.events.filter((e: any) => e.message === WAITING_FOR_RUNTIME).length;

test('an object with no runtime stays DEPLOYING and says why in one event, not one per reconcile', async () => {
  const env = await setup();
  try {
    await env.put('g', { size: 1 });
    const b = await until(
      () => env.get('g'),
      (b) => waiting(b) === 1,
    );
    assert.equal(b.status, 'DEPLOYING');
    assert.deepEqual(
      b.events.map((e: any) => [e.type, e.status]),
      [
        ['deployment', 'DEPLOYING'],
        ['deployment', 'DEPLOYING'],
      ],
    );
    // A write that changes nothing still wakes the reconciler: it must append nothing.
    await env.put('g', { size: 1 });
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(waiting(await env.get('g')), 1);
    // A new generation is a new deployment attempt, and gets its own explanation.
    await env.put('g', { size: 2 });
    const next = await until(
      () => env.get('g'),
      (b) => waiting(b) === 2,
    );
    assert.equal(next.events.at(-1).revision, '2');
  } finally {
    await env.close();
  }
});

test('an object with no runtime can be deactivated, enabled again and deleted', async () => {
  const env = await setup();
  try {
    await env.put('g', { enabled: false });
    const off = await until(
      () => env.get('g'),
      (b) => b.status === 'DEACTIVATED',
    );
    assert.deepEqual(
      off.events.map((e: any) => e.status),
      ['DEPLOYING', 'DEACTIVATING', 'DEACTIVATED'],
    );
    await env.put('g', { enabled: true });
    const on = await until(
      () => env.get('g'),
      (b) => b.events.at(-1).message === WAITING_FOR_RUNTIME,
    );
    assert.equal(on.status, 'DEPLOYING');
    await env.del('g');
    await until(
      () => env.get('g'),
      (b) => b === undefined,
    );
  } finally {
    await env.close();
  }
});
