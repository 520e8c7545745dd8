// Upgrading a data dir of the global build layout: each source goes to every workspace whose records name it, and
// nothing else of then is used again; apps a job task of an earlier server may still run on wait for a later start.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { SqliteStore } from '../store/sqlite.js';
import { CodeStore } from './code-store.js';
import { upgradeLegacyBuilds } from './legacy.js';

const root = mkdtempSync(join(tmpdir(), 'berth-legacy-'));
after(() => rmSync(root, { recursive: true, force: true }));

const digest = (c: string) => `sha256:${c.repeat(64)}`;

it('copies each legacy source into the workspaces naming it, then retires the global folders', async () => {
  const dataDir = join(root, 'data');
  const builds = join(dataDir, 'builds');
  for (const d of ['code', 'apps/k1', 'logs', 'deps/alpha/node', 'deps-images/x/alpha'])
    mkdirSync(join(builds, d), { recursive: true });
  for (const c of ['a', 'b', 'c']) writeFileSync(join(builds, 'code', `${c.repeat(64)}.zip`), `zip ${c}`);
  const store = new SqliteStore(join(root, 'berth.db'));
  const record = (workspace: string, kind: string, name: string, body: object) => ({
    op: 'create' as const,
    key: { kind, workspace, parent: '', name },
    body,
  });
  await store.write([
    record('alpha', 'Agent', 'one', {
      source: { digest: digest('a') },
      revisions: [{ source: digest('b') }],
    }),
    record('beta', 'Job', 'two', { source: { digest: digest('a') } }),
    record('beta', 'Sandbox', 'three', { source: { digest: digest('c') } }),
  ]);
  const code = new CodeStore(dataDir);
  const first = await upgradeLegacyBuilds({ dataDir, store, code, earlierTasksRunning: true });
  assert.deepEqual(first, { sources: 3, removed: false });
  assert.equal(readFileSync(code.pathOf('alpha', digest('a')), 'utf8'), 'zip a');
  assert.equal(readFileSync(code.pathOf('alpha', digest('b')), 'utf8'), 'zip b', 'a kept revision');
  assert.equal(
    readFileSync(code.pathOf('beta', digest('a')), 'utf8'),
    'zip a',
    'the same bytes, in beta too',
  );
  assert.equal(code.has('beta', digest('c')), false, 'only kinds built from code name sources');
  assert.equal(code.has('beta', digest('b')), false);
  for (const d of ['code', 'apps', 'logs', 'deps', 'deps-images'])
    assert.equal(existsSync(join(builds, d)), false, `builds/${d} left the lookups`);
  assert.ok(existsSync(join(builds, 'legacy')), 'apps a running task may use wait');

  const second = await upgradeLegacyBuilds({ dataDir, store, code, earlierTasksRunning: false });
  assert.deepEqual(second, { sources: 0, removed: true });
  assert.equal(existsSync(join(builds, 'legacy')), false);
  assert.ok(code.has('alpha', digest('a')));
  await store.close();
});
