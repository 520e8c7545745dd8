// The address table against a real SQLite store: sandbox names full of dashes never give two objects one label,
// and every label routes to the object that holds it.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { SecretBox } from '../crypto/secret-box.js';
import { ApiError } from '../errors.js';
import { sandbox } from '../kinds/sandbox.js';
import { HostLabelIndex, hostLabelKey } from '../store/host-labels.js';
import { Resources } from '../store/resources.js';
import { SqliteStore } from '../store/sqlite.js';
import { hostLabelsOf, MAX_DNS_LABEL, routeSandboxLabel, sandboxLabel } from './address.js';

/** Short names over a tiny alphabet, so dashes line up and labels collide often; a few long ones for the hash form. */
const dashed = fc.oneof(
  { weight: 5, arbitrary: fc.stringMatching(/^[ab]([ab-]{0,4}[ab])?$/) },
  { weight: 1, arbitrary: fc.stringMatching(/^[ab]{30}(-[ab]{1,20}){0,2}$/) },
);

async function withTable(fn: (r: Resources, index: HostLabelIndex) => Promise<void>) {
  const dir = mkdtempSync(join(tmpdir(), 'berth-labels-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  const resources = new Resources(store, [sandbox as any], new SecretBox(randomBytes(32)), {
    regions: ['local'],
    labelsOf: hostLabelsOf,
  });
  const index = new HostLabelIndex(store);
  await index.start();
  try {
    await fn(resources, index);
  } finally {
    index.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

test('random workspace and sandbox names never map two sandboxes to one label, and each label routes to its sandbox', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(fc.tuple(dashed, dashed), { minLength: 1, maxLength: 12 }), async (pairs) =>
      withTable(async (resources, index) => {
        const held = new Map<string, string>();
        for (const [ws, name] of pairs) {
          const label = sandboxLabel(ws, name);
          assert.ok(label.length <= MAX_DNS_LABEL, label);
          const id = `${ws}/${name}`;
          try {
            await resources.create(
              sandbox as any,
              { workspace: ws, parents: [], actor: 't' },
              { metadata: { name }, spec: {} },
            );
            assert.ok(!held.has(label), `${id} was given ${label}, already held by ${held.get(label)}`);
            held.set(label, id);
          } catch (e) {
            const taken = held.has(label);
            if (held.get(label) === id) continue; // the same sandbox twice: it exists
            assert.ok(taken, `${id} was refused though nobody holds ${label}: ${e}`);
            assert.ok(e instanceof ApiError && e.status === 409, String(e));
          }
        }
        for (const [label, id] of held) {
          const to = routeSandboxLabel(index, label);
          assert.equal(`${to.workspace}/${to.name}`, id);
        }
      }),
    ),
    { numRuns: 60 },
  );
});

test('the acme-eu and eu sandboxes cannot share an address; the first keeps it until its record is gone', async () => {
  await withTable(async (resources, index) => {
    const a = await resources.create(
      sandbox as any,
      { workspace: 'acme-eu', parents: [], actor: 'a' },
      { metadata: { name: 'app' }, spec: {} },
    );
    const steal = resources.create(
      sandbox as any,
      { workspace: 'eu', parents: [], actor: 'b' },
      { metadata: { name: 'app-acme' }, spec: {} },
    );
    await assert.rejects(steal, (e: ApiError) => {
      assert.equal(e.status, 409);
      assert.match(e.detail, /another workspace/);
      assert.doesNotMatch(e.detail, /of acme-eu|"app"/, 'the other tenant is not named');
      return true;
    });
    assert.deepEqual(routeSandboxLabel(index, 'sbx-app-acme-eu'), { workspace: 'acme-eu', name: 'app' });
    // Released with the final delete of the record, in the same write.
    await resources.removeRecord(a.object);
    assert.equal(await resources.store.get(hostLabelKey('sbx-app-acme-eu')), undefined);
    await resources.create(
      sandbox as any,
      { workspace: 'eu', parents: [], actor: 'b' },
      { metadata: { name: 'app-acme' }, spec: {} },
    );
    assert.deepEqual(routeSandboxLabel(index, 'sbx-app-acme-eu'), { workspace: 'eu', name: 'app-acme' });
  });
});

test('a label longer than a DNS label takes the hashed form, stable and distinct', () => {
  const long = sandboxLabel('w'.repeat(40), 'n'.repeat(40));
  assert.match(long, /^sbx--[0-9a-f]{32}$/);
  assert.equal(long, sandboxLabel('w'.repeat(40), 'n'.repeat(40)));
  assert.notEqual(long, sandboxLabel('w'.repeat(40), 'm'.repeat(40)));
  assert.equal(sandboxLabel('ws', 'box'), 'sbx-box-ws');
});
