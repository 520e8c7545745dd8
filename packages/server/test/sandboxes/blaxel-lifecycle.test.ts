// The unmodified @blaxel/core SDK on the lifecycle gaps of decision 047, as its own suite exercises them: a 1 s TTL
// counted from when the sandbox runs, the expired name reused at once, a deleted sandbox a 404 right after its
// DELETE, a failed create leaving no record, proxy secrets echoed by the create and never read back (kept across
// an update), and the message of a data-plane refusal where the SDK builds its error from.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runBlaxelScript } from '../../src/test-support/blaxel.js';
import { type SandboxServer, startSandboxServer, TEST_MEMORY_MB } from './support.js';

describe('@blaxel/core on the sandbox lifecycle', () => {
  let server: SandboxServer;
  let r: any;
  before(async () => {
    server = await startSandboxServer();
    const stdout = await runBlaxelScript(join(import.meta.dirname, 'blaxel-lifecycle.mjs'), server, {
      SANDBOX_PREFIX: 'life',
      SANDBOX_MEMORY: String(TEST_MEMORY_MB),
    });
    const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
    assert.ok(line, `the SDK script printed no result: ${stdout}`);
    r = JSON.parse(line.slice('RESULT '.length));
  });
  after(() => server?.close());

  it('a 1 s TTL counts from when the sandbox runs; once it reads TERMINATED its name makes a fresh sandbox', () => {
    // Counted from creation, a start slower than 1 s came back TERMINATED and the write below failed.
    assert.equal(r.ttl.created.status, 'DEPLOYED');
    assert.ok(r.ttl.created.expiresIn <= 1, JSON.stringify(r.ttl.created));
    assert.deepEqual(r.ttl, {
      created: r.ttl.created,
      written: 'this-should-not-persist',
      after: 'TERMINATED',
      again: 'DEPLOYED',
      marker: null,
    });
  });

  it('a deleted sandbox is a 404 right after its DELETE answers, its address too, and its name is free', () => {
    assert.equal(r.deleted.answered, 'TERMINATED');
    assert.equal(r.deleted.right, 404);
    assert.match(r.deleted.oldHandle, /404 Not Found: sandbox "life-del" not found/);
    assert.equal(r.deleted.reused, 'DEPLOYED');
  });

  it('a create whose image cannot be had is refused and leaves no sandbox behind', () => {
    assert.deepEqual(r.badImage, { created: 'rejected', after: 404 });
  });

  it('proxy routing secrets: echoed by the create, omitted on reads, kept by a GET-then-PUT update', () => {
    assert.deepEqual(r.proxy.echoed, { 'stripe-key': 'sk-live-test123' });
    assert.equal(r.proxy.readSecrets, null);
    assert.deepEqual(r.proxy.readHeaders, { Authorization: 'Bearer {{SECRET:stripe-key}}' });
    assert.equal(r.proxy.updatedTtl, '1h');
    assert.equal(r.proxy.updatedSecrets, null);
    assert.deepEqual(
      r.proxy.stored,
      { 'stripe-key': 'sk-live-test123' },
      'the update kept the stored secret',
    );
  });

  it('a refusal of the data plane reads as its message in the SDK’s error, not as a code', () => {
    assert.match(
      r.dataPlaneError,
      /^Sandbox request failed with status 404 Not Found: sandbox "life-proxy" not found/,
    );
    assert.doesNotMatch(r.dataPlaneError, /NOT_FOUND/);
  });
});
