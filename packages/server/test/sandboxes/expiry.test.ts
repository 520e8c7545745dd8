// A sandbox whose lifecycle says so is deleted by the server itself, with nobody asking.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type SandboxServer, startSandboxServer } from './support.js';

let s: SandboxServer;
before(async () => {
  s = await startSandboxServer();
});
after(() => s.close());

test('a ttl-max-age of 4s deletes the sandbox on its own, and it shows expiresIn until then', async () => {
  const sb = await s.create('short-lived', {
    lifecycle: {
      expirationPolicies: [{ type: 'ttl-max-age', value: '4s', action: 'delete' }],
      terminatedRetention: '1m',
    },
  });
  assert.equal(sb.status, 'DEPLOYED');
  assert.ok(sb.expiresIn >= 0 && sb.expiresIn <= 4, `expiresIn ${sb.expiresIn}`);
  // It reads TERMINATED as soon as it expires; the sweep (every 5 s) then stops it and writes the record.
  // Bounded generously: deletion lands well within 20 s of creation.
  const gone = await s.waitFor(
    'short-lived',
    (b) => b.events.some((e: any) => e.status === 'TERMINATED'),
    'TERMINATED by the sweep',
  );
  assert.equal(gone.status, 'TERMINATED');
  const deleting = gone.events.find((e: any) => e.status === 'DELETING');
  assert.match(deleting.message, /berth:expiry/);
  assert.equal((await s.run(`${sb.metadata.url}/health`)).status, 404);
});

test('a sandbox without any ttl or policy has no expiresIn and stays', async () => {
  const sb = await s.create('long-lived');
  assert.equal(sb.expiresIn, undefined);
  assert.equal(sb.status, 'DEPLOYED');
});
