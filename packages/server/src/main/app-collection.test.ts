// Built apps no revision keeps (main/app-collection.ts, Builder.collectApps) over a real data dir and SQLite store:
// the apps wanted are the kept revisions' of agents, functions and jobs, each one's last upload's build, and the
// unfinished executions' (per workspace); an app neither wanted nor younger than the bound is removed with its plan and log, another workspace's
// never; an app built from a Dockerfile lets go of its image's name first, and stays while that is refused.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Builder } from '../builds/builder.js';
import { builtImageName } from '../builds/dockerfile/workload.js';
import { appsDirOf } from '../builds/layout.js';
import { SqliteStore } from '../store/sqlite.js';
import { create } from '../store/store.js';
import { wantedApps } from './app-collection.js';

const HOUR = 3600_000;

describe('built apps no revision keeps', () => {
  let dir: string;
  let store: SqliteStore;
  let builder: Builder;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'berth-app-collect-'));
    store = new SqliteStore(join(dir, 'berth.db'));
    builder = new Builder({
      dataDir: dir,
      instances: undefined as never,
      code: undefined as never,
      outbound: undefined as never,
    });
  });
  after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** An app as a build leaves it, built `ageMs` ago. */
  const app = (ws: string, key: string, ageMs: number, language = 'python') => {
    const apps = appsDirOf(dir, ws);
    mkdirSync(join(apps, key), { recursive: true });
    writeFileSync(join(apps, key, 'main.py'), 'print(1)\n');
    const plan = join(apps, `${key}.json`);
    writeFileSync(plan, JSON.stringify({ language, start: 'python main.py' }));
    const when = new Date(Date.now() - ageMs);
    utimesSync(plan, when, when);
    mkdirSync(join(dir, 'builds/workspaces', ws, 'logs'), { recursive: true });
    writeFileSync(builder.logPath(ws, key), 'berth: built\n');
  };
  const held = (ws: string, key: string) => builder.builtByKey(ws, key) !== undefined;

  it('wants the apps of every kept revision and of every unfinished execution, per workspace', async () => {
    const key = (kind: string, workspace: string, name: string, parent = '') => ({
      kind,
      workspace,
      parent,
      name,
    });
    // Its last upload's build failed to start: no revision records it, its build (and log) are still wanted.
    const failed = `sha256:${'cd'.repeat(32)}`;
    await create(store, key('Agent', 'ws-a', 'bot'), {
      revisions: [{ app: 'a1' }, { app: 'a2' }],
      source: { digest: failed },
    });
    await create(store, key('Function', 'ws-a', 'fn'), { revisions: [{ app: 'f1' }] });
    await create(store, key('Job', 'ws-b', 'nightly'), { revisions: [{ app: 'j1' }] });
    await create(store, key('JobExecution', 'ws-b', 'x1', 'nightly'), { status: 'running', app: 'x1' });
    await create(store, key('JobExecution', 'ws-b', 'x2', 'nightly'), { status: 'succeeded', app: 'x2' });
    const wanted = await wantedApps(store, builder);
    assert.deepEqual(
      [...(wanted.get('ws-a') ?? [])].sort(),
      ['a1', 'a2', 'f1', builder.keyOf('ws-a', failed)].sort(),
    );
    assert.deepEqual([...(wanted.get('ws-b') ?? [])].sort(), ['j1', 'x1']);
  });

  it('removes an app neither wanted nor young, with its plan and log; never another workspace’s', () => {
    const [kept, gone, young, other] = ['a'.repeat(32), 'b'.repeat(32), 'c'.repeat(32), 'd'.repeat(32)];
    app('ws-c', kept, 2 * HOUR);
    app('ws-c', gone, 2 * HOUR);
    app('ws-c', young, 60_000);
    app('ws-d', other, 2 * HOUR);
    const removed = builder.collectApps('ws-c', new Set([kept]), HOUR);
    assert.deepEqual(removed, [gone]);
    assert.ok(held('ws-c', kept) && held('ws-c', young) && held('ws-d', other));
    assert.ok(!held('ws-c', gone));
    assert.equal(existsSync(join(appsDirOf(dir, 'ws-c'), gone)), false, 'its directory');
    assert.equal(existsSync(builder.logPath('ws-c', gone)), false, 'its log');
  });

  it('an old app a build finds again is young again', async () => {
    const source = `sha256:${'ab'.repeat(32)}`;
    const key = builder.keyOf('ws-f', source);
    app('ws-f', key, 2 * HOUR);
    const found = await builder.build('ws-f', source, new AbortController().signal, undefined, {
      kind: 'Agent',
      name: 'a',
    });
    assert.equal(found.key, key);
    assert.deepEqual(
      builder.collectApps('ws-f', new Set(), HOUR),
      [],
      'not removed under the deploy using it',
    );
  });

  it("lets go of a Dockerfile app's image name first, and keeps the app while that is refused", () => {
    const key = 'e'.repeat(32);
    app('ws-e', key, 2 * HOUR, 'dockerfile');
    const released: string[] = [];
    let inUse = true;
    const release = (name: string) => {
      if (inUse) throw new Error('image in use by a sandbox');
      released.push(name);
    };
    assert.deepEqual(builder.collectApps('ws-e', new Set(), HOUR, release), []);
    assert.ok(held('ws-e', key), 'kept while its image runs');
    inUse = false;
    assert.deepEqual(builder.collectApps('ws-e', new Set(), HOUR, release), [key]);
    assert.deepEqual(released, [builtImageName(key)]);
  });
});
