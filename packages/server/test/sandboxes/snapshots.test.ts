// Snapshots, restore, fork, archive and unarchive (decision 053) with the unmodified @blaxel/core SDK and the API:
// the SDK's flows and wire shapes, writes kept byte for byte across cycles, connections not dropped by a capture,
// forks that share no writable state, another workspace's sandbox and snapshots out of reach, the quota, and a
// capture killed half-way that leaves no snapshot.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runBlaxelScript } from '../../src/test-support/blaxel.js';
import { type SandboxServer, startSandboxServer, TEST_MEMORY_MB } from './support.js';

const resultOf = (stdout: string) => {
  const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
  assert.ok(line, `the SDK script printed no result: ${stdout}`);
  return JSON.parse(line.slice('RESULT '.length));
};

describe('@blaxel/core snapshots, restore, fork and archive', () => {
  let server: SandboxServer;
  let r: any;
  let held: any;
  before(async () => {
    server = await startSandboxServer();
    const env = { SANDBOX_PREFIX: 'snp', SANDBOX_MEMORY: String(TEST_MEMORY_MB), CYCLES: '20' };
    r = resultOf(
      await runBlaxelScript(join(import.meta.dirname, 'blaxel-snapshots.mjs'), server, env, 180_000),
    );
    held = resultOf(
      await runBlaxelScript(join(import.meta.dirname, 'blaxel-snapshot-cycles.mjs'), server, env, 180_000),
    );
  });
  after(() => server?.close());

  it('a snapshot has the service’s fields and says it holds files only; a second of the same name is a 409', () => {
    assert.equal(r.create.name, 'before', JSON.stringify(r.create));
    assert.match(r.create.id, /^snap-[0-9a-f]{16}$/);
    assert.equal(r.create.status, 'ready');
    assert.equal(r.create.workspace, 'default');
    assert.deepEqual(r.create.source, { kind: 'sandbox', name: 'snp-src', deleted: false });
    assert.equal(r.create.spec.memory, TEST_MEMORY_MB);
    assert.deepEqual(r.create.spec.holds, { files: true, memory: false, processes: false, volumes: false });
    assert.equal(r.duplicate, 409);
  });

  it('restore brings the files back (root and /usr) under the same name and URL, without the later writes', () => {
    assert.deepEqual(r.restore, {
      answer: { name: 'snp-src', snapshotId: r.create.id },
      a: 'v1',
      b: null,
      usr: 'usr-file\n',
      url: true,
    });
  });

  it('lists: the sandbox’s snapshots, and the workspace’s paged as {data, meta}; get by id and by name', () => {
    assert.deepEqual(r.list, {
      mine: ['before', 'second', 'third'],
      pageSize: 2,
      hasMore: true,
      all: ['before', 'second', 'third'],
      got: 'before',
      byName: 'second',
    });
  });

  it('a fork of the sandbox has its files and envs and shares no writes with it either way', () => {
    assert.deepEqual(r.fork, {
      answer: { name: 'snp-f1', snapshotId: 'string', type: 'sandbox' },
      a: 'v1',
      forkOnlyInSource: null,
      sourceOnlyInFork: null,
      greeting: 'hi',
      usr: 'usr-file\n',
    });
  });

  it('a fork of a snapshot takes the envs given over the source’s', () => {
    assert.deepEqual(r.forkSnapshot, {
      answer: { name: 'snp-f2', snapshotId: r.create.id, type: 'sandbox' },
      a: 'v1',
      envs: 'forked x',
    });
  });

  it('a fork into an application is a 422 (Berth has none); onto an existing name a 409', () => {
    assert.equal(r.application, 422);
    assert.equal(r.forkExisting, 409);
  });

  it('archive goes to ARCHIVED and unarchive back to DEPLOYED with the files', () => {
    assert.deepEqual(r.archive, { archived: 'ARCHIVED', status: 'DEPLOYED', forkOnly: 'mine', a: 'v1' });
  });

  it('a snapshot outlives its source (source.deleted) and forks after it; deleted, it is a 404', () => {
    assert.deepEqual(r.sourceDeleted, { deleted: true, a: 'v1' });
    assert.deepEqual(r.delete, { after: 404 });
  });

  it('a preview request and a log stream held open across a snapshot are not dropped', () => {
    assert.deepEqual(held.held, {
      status: 'ready',
      answer: '200 slow-ok',
      ticksAfterSnapshot: true,
      streamErrors: 0,
      stillRunning: 'running',
    });
  });

  it('20 rounds of writes, snapshot, more writes and restore come back byte for byte', () => {
    assert.deepEqual(held.cycles, { rounds: 20, bad: [] });
  });
});
