// The unmodified @blaxel/core SDK, in its own process and pointed at Berth, creates a sandbox and works in it.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { runBlaxelScript } from '../../src/test-support/blaxel.js';
import { type SandboxServer, startSandboxServer, TEST_MEMORY_MB } from './support.js';

let server: SandboxServer;
before(async () => {
  server = await startSandboxServer();
});
after(() => server.close());

async function runSdk(script: string, env: Record<string, string>) {
  const stdout = await runBlaxelScript(script, server, env);
  const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
  assert.ok(line, `the SDK script printed no result: ${stdout}`);
  return JSON.parse(line.slice('RESULT '.length));
}

test('@blaxel/core creates a sandbox, runs processes, uses its files, watches, and deletes it', async () => {
  const r = await runSdk(join(import.meta.dirname, 'blaxel-client.mjs'), {
    SANDBOX_NAME: 'sdk-box',
    SANDBOX_MEMORY: String(TEST_MEMORY_MB),
  });
  assert.equal(r.created.status, 'DEPLOYED');
  assert.equal(r.created.state, 'RUNNING');
  assert.equal(r.created.url, `${server.url}/run/default/sandboxes/sdk-box`);
  assert.deepEqual(r.sync, { status: 'failed', exitCode: 4, stdout: 'hello\n' });
  assert.equal(r.streamed.exitCode, 0);
  assert.deepEqual(r.streamed.logs.map((l: string) => l.trimEnd()).sort(), [
    'stderr:err-line',
    'stdout:out-line',
  ]);
  assert.equal(r.read, 'written by the sdk');
  assert.deepEqual(r.ls, ['a.txt']);
  assert.deepEqual(r.lsAfterRm, []);
  assert.equal(r.watchError, undefined);
  assert.ok(r.watch, 'a file event reached the watcher');
  assert.ok(['CREATE', 'WRITE'].includes(r.watch.op), JSON.stringify(r.watch));
  assert.match(r.watch.name, /^f\d+\.txt$/);
  assert.equal(r.logs, 'logged line\n');
  assert.ok(r.processes.includes('logger'));
  assert.equal(r.again.status, 'DEPLOYED');
  assert.equal(r.again.createdAt, r.created.createdAt, 'createIfNotExists answered the same sandbox');
  assert.equal(r.afterDelete, 'error 404', 'deleted before the DELETE answered, as the SDK reads it');
});

test('@blaxel/core mounts a volume, writes, recreates the sandbox with it and reads the data back; finds one by externalId, is refused a resize, deletes', async () => {
  const r = await runSdk(join(import.meta.dirname, 'blaxel-volumes.mjs'), {
    SANDBOX_MEMORY: String(TEST_MEMORY_MB),
  });
  assert.deepEqual(r.volume, { name: 'sdk-vol', size: 32 });
  assert.equal(r.first, 'DEPLOYED');
  assert.equal(r.attached, 'sandbox:sdk-vol-one');
  assert.equal(r.readBack, 'kept across sandboxes');
  assert.equal(r.byExternalId, 'sdk-ext');
  assert.deepEqual(r.resize, { status: 422, code: 422, error: 'VALIDATION_FAILED', pointer: '/spec/size' });
  assert.equal(r.afterDelete, 404, 'a deleted volume is a 404 right after its DELETE');
});

test('@blaxel/core creates a drive and mounts it at once in two sandboxes, lists, unmounts, reads it back later, deletes it', async () => {
  const r = await runSdk(join(import.meta.dirname, 'blaxel-drives.mjs'), {
    SANDBOX_MEMORY: String(TEST_MEMORY_MB),
  });
  assert.equal(r.created, 'sdk-drive');
  assert.equal(r.status, 'DEPLOYED', 'the create answers once the drive can be mounted');
  assert.equal(r.mount.success, true);
  assert.equal(r.mount.mountPath, '/home/user/drive');
  assert.equal(r.readByTwo, 'shared through a drive');
  assert.deepEqual(r.list, [
    { driveName: 'sdk-drive', drivePath: '/', mountPath: '/tmp/drive', readOnly: true },
  ]);
  assert.equal(r.unmount.success, true);
  assert.deepEqual(r.listAfter, []);
  assert.equal(r.readBack, 'shared through a drive');
  assert.equal(r.afterDelete, 404, 'a deleted drive is a 404 right after its DELETE');
});
