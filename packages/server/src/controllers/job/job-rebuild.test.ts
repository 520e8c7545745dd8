// An execution's app built again on this server from the revision that recorded it (job-rebuild.ts): what is built,
// and each reason it cannot be, said in the error the tasks' attempts carry.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BaseImageError, BuildError } from '../../builds/builder.js';
import type { StoredObject } from '../../store/store.js';
import { AppUnavailableError, type JobRebuildDeps, rebuildJobApp } from './job-rebuild.js';

const job = (revisions: object[], image?: string) =>
  ({
    kind: 'Job',
    workspace: 'ws',
    parent: '',
    name: 'nightly',
    body: { spec: { runtime: image ? { image } : {} }, revisions },
  }) as unknown as StoredObject;

function deps(o: StoredObject | undefined, more: Partial<JobRebuildDeps['builder']> = {}, has = true) {
  const built: unknown[] = [];
  const d: JobRebuildDeps = {
    store: { get: async (k) => (o && k.workspace === o.workspace && k.name === o.name ? o : undefined) },
    builder: {
      baseImage: () => undefined,
      keyOf: (_ws, digest) => `key-${digest}`,
      build: async (ws, digest, _signal, base, owner) => {
        built.push({ ws, digest, base, owner });
        return {} as never;
      },
      ...more,
    },
    code: { has: () => has },
  };
  return { d, built };
}

const signal = new AbortController().signal;
const revs = [
  { id: 'r2', app: 'key-d2', source: 'd2', start: '', createdAt: '' },
  { id: 'r1', app: 'key-d1', source: 'd1', start: '', createdAt: '' },
];

test('builds the revision that recorded the app, an older one the job no longer serves included', async () => {
  const { d, built } = deps(job(revs));
  await rebuildJobApp(d, 'ws', 'nightly', 'key-d1', signal);
  assert.deepEqual(built, [
    { ws: 'ws', digest: 'd1', base: undefined, owner: { kind: 'Job', name: 'nightly' } },
  ]);
});

test('says why the app cannot be built: job gone, revision not kept, image, source missing, build failed', async () => {
  const why = async (d: JobRebuildDeps, app = 'key-d1', ws = 'ws') => {
    try {
      await rebuildJobApp(d, ws, 'nightly', app, signal);
    } catch (err) {
      assert.ok(err instanceof AppUnavailableError, String(err));
      return err.message;
    }
    assert.fail('built');
  };
  assert.match(await why(deps(job(revs)).d, 'key-d1', 'other'), /job nightly no longer exists/);
  assert.match(await why(deps(job(revs)).d, 'key-d0'), /revision the job no longer keeps/);
  assert.match(
    await why(
      deps(job(revs, 'local/app:1'), {
        baseImage: () => {
          throw new BaseImageError('image local/app:1 is not in this workspace');
        },
      }).d,
    ),
    /revision r1 cannot be built on this server: image local\/app:1/,
  );
  assert.match(
    await why(deps(job(revs), { keyOf: (_ws, d) => `other-${d}` }).d),
    /built on another image than spec.runtime.image names now/,
  );
  assert.match(await why(deps(job(revs), {}, false).d), /source of revision r1 is not on this server/);
  assert.match(
    await why(
      deps(job(revs), {
        build: async () => {
          throw new BuildError('npm run build exited with code 1', 'BUILD_BROKEN is set');
        },
      }).d,
    ),
    /the build of revision r1 failed: npm run build exited with code 1\nBUILD_BROKEN is set/,
  );
});
