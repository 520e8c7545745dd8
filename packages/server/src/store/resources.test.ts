// The write pipeline against a real store (SQLite and PostgreSQL), where requests and controllers race.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { SecretBox } from '../crypto/secret-box.js';
import { STORE_DRIVERS } from '../test-support/store-drivers.js';
import { note, widget } from '../test-support/test-kinds.js';
import { Resources } from './resources.js';
import { EVERY_WORKSPACE, type ListQuery, type ResourceKey, type Store, type WriteOp } from './store.js';

for (const driver of STORE_DRIVERS)
  describe(`on ${driver.name}`, () => {
    test('a delete that races a status write (a controller between its read and its write) still succeeds', async () => {
      const { store, close } = await driver.open();
      // The first delete's write is preceded by a controller's status write, exactly in the window between the
      // pipeline's read and its write.
      let racing: ((key: ResourceKey) => Promise<unknown>) | undefined;
      const racy: Store = Object.create(store);
      racy.write = async (ops: WriteOp[]) => {
        const race = racing;
        racing = undefined;
        const last = ops.at(-1);
        if (race && last && 'key' in last) await race(last.key);
        return store.write(ops);
      };
      const resources = new Resources(racy, [widget, note], new SecretBox(randomBytes(32)), {
        regions: ['local'],
      });
      const ctx = { workspace: 'ws', parents: [], actor: 'test' };
      try {
        for (const kd of [widget, note]) {
          await resources.create(kd, ctx, { metadata: { name: 'w' }, spec: {} });
          racing = (key) =>
            store.write([{ op: 'update', key, mutate: (cur) => ({ ...cur.body, lastUsedAt: 'now' }) }]);
          const out = await resources.delete(kd, ctx, 'w');
          assert.equal(racing, undefined, 'the race happened');
          if (kd.hasStatus) assert.equal(out.body.status, 'DELETING');
          else
            assert.equal(
              await store.get({ kind: kd.kind, workspace: 'ws', parent: '', name: 'w' }),
              undefined,
            );
        }
      } finally {
        await close();
      }
    });

    test('a list names its workspace: one workspace, every workspace said so, or the store refuses it', async () => {
      const { store, close } = await driver.open();
      try {
        for (const workspace of ['acme', 'beta'])
          await store.write([
            {
              op: 'create',
              key: { kind: 'Note', workspace, parent: '', name: 'same' },
              body: { v: workspace },
            },
          ]);
        const acme = await store.list({ kind: 'Note', workspace: 'acme' });
        assert.deepEqual(
          acme.map((o) => o.body.v),
          ['acme'],
        );
        const every = await store.list({ kind: 'Note', workspace: EVERY_WORKSPACE });
        assert.deepEqual(every.map((o) => o.body.v).sort(), ['acme', 'beta']);
        // What untyped code (or a cast) would send: no workspace at all is not read as "every workspace".
        await assert.rejects(
          store.list({ kind: 'Note' } as unknown as ListQuery),
          /a list of Note names no workspace/,
        );
      } finally {
        await close();
      }
    });
  });
