// The manager over a real SQLite store and the real resource pipeline, with reconcilers plugged in by kind.
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
import { note, widget } from '../../test-support/test-kinds.js';
import { Resources } from '../../store/resources.js';
import { SqliteStore } from '../../store/sqlite.js';
import type { ResourceKey } from '../../store/store.js';
import { type Reconciler, startControllers, TerminalError } from './index.js';
import { namedIn } from './reconciler.js';

async function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'berth-manager-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  const resources = new Resources(store, [widget, note], new SecretBox(randomBytes(32)), {
    regions: ['local'],
  });
  const create = (kd: KindDescriptor, workspace: string, name: string) =>
    resources.create(kd, { workspace, parents: [], actor: 'test' }, { metadata: { name }, spec: {} });
  return {
    resources,
    create,
    get: (workspace: string, name: string) => store.get({ kind: 'Widget', workspace, parent: '', name }),
    async close() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const logger = pino({ level: 'silent' });

async function until(cond: () => boolean | Promise<boolean>) {
  for (let i = 0; i < 2000; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 2));
  }
  assert.fail('condition not reached');
}

test('at start every object of a reconciled kind is reconciled, in every workspace', async () => {
  const env = await setup();
  await env.create(widget, 'ws-a', 'one');
  await env.create(widget, 'ws-b', 'two');
  await env.create(note, 'ws-a', 'not-reconciled');
  const seen: ResourceKey[] = [];
  const r: Reconciler = {
    async reconcile(key) {
      seen.push(key);
      return { done: true };
    },
  };
  const c = startControllers({ resources: env.resources, logger, reconcilers: { Widget: () => r } });
  try {
    await until(() => seen.length >= 2);
    assert.deepEqual(seen.map((k) => `${k.kind}:${k.workspace}/${k.name}`).sort(), [
      'Widget:ws-a/one',
      'Widget:ws-b/two',
    ]);
  } finally {
    await c.stop();
    await env.close();
  }
});

test('a change in the store queues the changed object', async () => {
  const env = await setup();
  const seen: string[] = [];
  const r: Reconciler = {
    async reconcile(key) {
      seen.push(key.name);
      return { done: true };
    },
  };
  const c = startControllers({ resources: env.resources, logger, reconcilers: { Widget: () => r } });
  try {
    await env.create(widget, 'default', 'late');
    await until(() => seen.includes('late'));
  } finally {
    await c.stop();
    await env.close();
  }
});

test('a thrown error is retried until the reconcile succeeds', async () => {
  const env = await setup();
  await env.create(widget, 'default', 'flaky');
  let calls = 0;
  const r: Reconciler = {
    async reconcile() {
      calls++;
      if (calls < 3) throw new Error('not yet');
      return { done: true };
    },
  };
  const c = startControllers({
    resources: env.resources,
    logger,
    reconcilers: { Widget: () => r },
    queue: { baseDelayMs: 1 },
  });
  try {
    await until(() => calls === 3);
  } finally {
    await c.stop();
    await env.close();
  }
});

test('a TerminalError records FAILED with its message once and is not retried', async () => {
  const env = await setup();
  await env.create(widget, 'default', 'broken');
  let calls = 0;
  const r: Reconciler = {
    async reconcile() {
      calls++;
      throw new TerminalError('cannot work: the spec names nothing real');
    },
  };
  const c = startControllers({
    resources: env.resources,
    logger,
    reconcilers: { Widget: () => r },
    queue: { baseDelayMs: 1 },
  });
  try {
    await until(async () => (await env.get('default', 'broken'))?.body.status === 'FAILED');
    // The FAILED write wakes the reconciler once more; it fails the same way and writes nothing.
    await until(() => calls >= 2);
    await new Promise((r) => setTimeout(r, 50));
    const o = await env.get('default', 'broken');
    const failed = o!.body.events.filter((e: any) => e.status === 'FAILED');
    assert.equal(failed.length, 1);
    assert.equal(failed[0].message, 'cannot work: the spec names nothing real');
    assert.equal(failed[0].type, 'deployment');
    assert.equal(calls, 2, 'a terminal error is not retried with backoff');
  } finally {
    await c.stop();
    await env.close();
  }
});

test('stop waits for the reconcile in flight', async () => {
  const env = await setup();
  await env.create(widget, 'default', 'slow');
  let started = false;
  let finished = false;
  const r: Reconciler = {
    async reconcile(_key, signal) {
      started = true;
      await new Promise<void>((res) => signal.addEventListener('abort', () => res(), { once: true }));
      finished = true;
      return { done: true };
    },
  };
  const c = startControllers({ resources: env.resources, logger, reconcilers: { Widget: () => r } });
  await until(() => started);
  await c.stop();
  assert.equal(finished, true);
  await env.close();
});

test('a change to a watched kind wakes only the dependants naming it when the watch says which names', async () => {
  const gadget: KindDescriptor = {
    ...widget,
    kind: 'Gadget',
    plural: 'gadgets',
    path: '/gadgets',
    spec: Type.Object({ notes: Type.Optional(Type.Array(Type.String())) }),
  };
  const dir = mkdtempSync(join(tmpdir(), 'berth-manager-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  const resources = new Resources(store, [widget, note, gadget], new SecretBox(randomBytes(32)), {
    regions: ['local'],
  });
  const make = (kd: KindDescriptor, name: string, spec: object = {}) =>
    resources.create(kd, { workspace: 'ws', parents: [], actor: 'test' }, { metadata: { name }, spec });
  await make(gadget, 'g-a', { notes: ['a'] });
  await make(gadget, 'g-b', { notes: ['b', 'c'] });
  await make(gadget, 'g-none');
  await make(widget, 'w');
  const seen: string[] = [];
  const reconciler = (watches: Reconciler['watches']): Reconciler => ({
    watches,
    async reconcile(key) {
      seen.push(key.name);
      return { done: true };
    },
  });
  const c = startControllers({
    resources,
    logger,
    reconcilers: {
      Gadget: () => reconciler([namedIn('Note', 'notes')]),
      // A bare kind: every widget depends on every note.
      Widget: () => reconciler(['Note']),
    },
  });
  try {
    await until(() => seen.length >= 4);
    seen.length = 0;
    await make(note, 'a');
    await until(() => seen.includes('g-a') && seen.includes('w'));
    await make(note, 'c');
    await until(() => seen.includes('g-b') && seen.filter((n) => n === 'w').length === 2);
    assert.deepEqual([...seen].sort(), ['g-a', 'g-b', 'w', 'w']);
  } finally {
    await c.stop();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a burst of changes to a watched kind lists its dependants once per workspace, and wakes every one named', async () => {
  const gadget: KindDescriptor = {
    ...widget,
    kind: 'Gadget',
    plural: 'gadgets',
    path: '/gadgets',
    spec: Type.Object({ notes: Type.Optional(Type.Array(Type.String())) }),
  };
  const dir = mkdtempSync(join(tmpdir(), 'berth-manager-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  const resources = new Resources(store, [widget, note, gadget], new SecretBox(randomBytes(32)), {
    regions: ['local'],
  });
  const make = (kd: KindDescriptor, workspace: string, name: string, spec: object = {}) =>
    resources.create(kd, { workspace, parents: [], actor: 'test' }, { metadata: { name }, spec });
  await make(gadget, 'ws', 'g-a', { notes: ['n3'] });
  await make(gadget, 'ws', 'g-b', { notes: ['n17'] });
  await make(gadget, 'ws', 'g-none', { notes: ['elsewhere'] });
  await make(gadget, 'other', 'g-other', { notes: ['n3'] });
  const seen: string[] = [];
  const c = startControllers({
    resources,
    logger,
    reconcilers: {
      Gadget: () => ({
        watches: [namedIn('Note', 'notes')],
        async reconcile(key) {
          seen.push(`${key.workspace}/${key.name}`);
          return { done: true };
        },
      }),
    },
  });
  const lists: string[] = [];
  const list = store.list.bind(store);
  store.list = (q) => {
    if (q.kind === 'Gadget' && typeof q.workspace === 'string') lists.push(q.workspace);
    return list(q);
  };
  try {
    await until(() => seen.length >= 4);
    seen.length = 0;
    // Twenty writes issued in one turn: one group commit, so twenty changes heard together.
    const key = (name: string) => ({ kind: 'Note', workspace: 'ws', parent: '', name });
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        store.write([{ op: 'create', key: key(`n${i}`), body: { metadata: { name: `n${i}` }, spec: {} } }]),
      ),
    );
    await until(() => seen.includes('ws/g-a') && seen.includes('ws/g-b'));
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(lists, ['ws'], 'one list of the dependants for twenty changes');
    assert.deepEqual(
      [...seen].sort(),
      ['ws/g-a', 'ws/g-b'],
      "neither the unnamed one nor another workspace's",
    );
  } finally {
    await c.stop();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
