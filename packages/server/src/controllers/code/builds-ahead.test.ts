// Builds ahead on a follower (builds-ahead.ts): what the leader built is built here from the local copy of its
// source, one build at a time, nothing while this server leads, a failure tried again after a backoff, and nothing
// ever written to the store. The cluster flow (a new leader starting the agent without building) is
// test/cluster/builds-ahead.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { BaseImage, BuiltApp } from '../../builds/builder.js';
import { SqliteStore } from '../../store/sqlite.js';
import type { Change } from '../../store/store.js';
import { BuildsAhead } from './builds-ahead.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const D1 = `sha256:${'1'.repeat(64)}`;
const D2 = `sha256:${'2'.repeat(64)}`;
const D3 = `sha256:${'3'.repeat(64)}`;

describe('builds ahead on a server that does not lead', () => {
  let dir: string;
  let store: SqliteStore;
  const loops: BuildsAhead[] = [];
  const stores: SqliteStore[] = [];
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'berth-builds-ahead-'));
    store = new SqliteStore(join(dir, 'berth.db'));
    stores.push(store);
  });
  after(async () => {
    for (const l of loops) await l.close();
    for (const s of stores) s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A builder whose builds take `ms` and fail for the digests in `failing`, recording what it was asked. */
  const fakeBuilder = (o: { ms?: number; failing?: Set<string> } = {}) => {
    const built = new Set<string>();
    const asked: string[] = [];
    let running = 0;
    let most = 0;
    return {
      asked,
      get most() {
        return most;
      },
      keyOf: (ws: string, digest: string, base?: BaseImage) =>
        `${ws}-${digest.slice(7, 9)}-${base?.id ?? ''}`,
      baseImage: () => undefined,
      builtByKey: (ws: string, key: string) =>
        built.has(`${ws}/${key}`) ? ({ key } as unknown as BuiltApp) : undefined,
      async build(ws: string, digest: string) {
        const key = `${ws}-${digest.slice(7, 9)}-`;
        asked.push(key);
        most = Math.max(most, ++running);
        await sleep(o.ms ?? 20);
        running--;
        if (o.failing?.has(digest)) throw new Error('the build failed');
        built.add(`${ws}/${key}`);
        return { key } as unknown as BuiltApp;
      },
    };
  };
  const put = async (ws: string, name: string, body: Record<string, unknown>) => {
    const key = { kind: 'Agent', workspace: ws, parent: '', name };
    const full = { metadata: { name }, ...body };
    await store.write([
      (await store.get(key)) ? { op: 'update', key, body: full } : { op: 'create', key, body: full },
    ]);
  };
  const start = async (
    builder: ReturnType<typeof fakeBuilder>,
    o: { leads?: () => boolean; has?: (ws: string, d: string) => boolean; backoffMs?: number } = {},
  ) => {
    const counts = { built: 0, copied: 0, failed: 0 };
    const loop = new BuildsAhead({
      store,
      builder: builder as never,
      code: { has: o.has ?? (() => true) },
      leads: o.leads ?? (() => false),
      counted: (x) => counts[x]++,
      tickMs: 20,
      firstBackoffMs: o.backoffMs ?? 60_000,
    });
    loops.push(loop);
    await loop.start();
    return counts;
  };
  const until = async (what: () => boolean) => {
    for (let i = 0; i < 200 && !what(); i++) await sleep(20);
    assert.ok(what());
  };

  it('builds the revision an object serves and its current source once the leader built it, one at a time, writing nothing', async () => {
    await put('ws1', 'served', {
      status: 'DEPLOYED',
      source: { digest: D2 },
      activeRevision: 'r1',
      revisions: [{ id: 'r1', app: 'ws1-11-', source: D1 }],
    });
    await put('ws1', 'building', { status: 'BUILDING', source: { digest: D3 } });
    await put('ws1', 'failed', { status: 'FAILED', source: { digest: D3 } });
    await put('ws1', 'off', { status: 'DEACTIVATED', spec: { enabled: false }, source: { digest: D3 } });
    const writes: Change[] = [];
    const unwatch = store.watch((c) => writes.push(c));
    const b = fakeBuilder();
    const counts = await start(b);
    await until(() => counts.built === 2);
    await sleep(100);
    unwatch();
    assert.deepEqual(b.asked, ['ws1-11-', 'ws1-22-']);
    assert.equal(b.most, 1);
    assert.deepEqual(writes, []);
    // The leader finished building the other one: it is built here next.
    await put('ws1', 'building', { status: 'DEPLOYED', source: { digest: D3 } });
    await until(() => counts.built === 3);
    assert.deepEqual(b.asked, ['ws1-11-', 'ws1-22-', 'ws1-33-']);
  });

  it('waits for the copy of the source, builds nothing while leading, and tries a failed build again later', async () => {
    store = new SqliteStore(join(dir, 'second.db'));
    stores.push(store);
    await put('ws2', 'a', { status: 'DEPLOYED', source: { digest: D1 } });
    await put('ws2', 'b', { status: 'DEPLOYED', source: { digest: D2 } });
    let copied = false;
    let leading = true;
    const b = fakeBuilder({ failing: new Set([D2]) });
    const counts = await start(b, {
      leads: () => leading,
      has: (ws, d) => ws !== 'ws2' || d !== D1 || copied,
      backoffMs: 200,
    });
    await sleep(150);
    assert.deepEqual(
      b.asked.filter((k) => k.startsWith('ws2')),
      [],
    );
    leading = false;
    await until(() => counts.failed >= 1);
    assert.equal(counts.built, 0, 'the source of a is not copied here yet');
    copied = true;
    await until(() => counts.built === 1 && counts.failed >= 2);
    assert.ok(b.asked.filter((k) => k === 'ws2-22-').length >= 2);
  });
});
