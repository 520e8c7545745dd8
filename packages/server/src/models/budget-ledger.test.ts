import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { SqliteStore } from '../store/sqlite.js';
import { BUDGET_WINDOW_KIND, BudgetLedger, blockOf } from './budget-ledger.js';
import type { BudgetPolicy, Limits, ReserveResult } from './token-budget.js';

const T0 = Date.UTC(2025, 0, 15, 10, 0, 0);
const policy = (limits: Limits): BudgetPolicy => ({
  id: 'w1\u0000p',
  workspace: 'w1',
  name: 'p',
  granularity: 'hour',
  step: 1,
  limits,
});

function withStore(fn: (store: SqliteStore) => Promise<void>) {
  return async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-ledger-'));
    const store = new SqliteStore(join(dir, 'berth.db'));
    try {
      await fn(store);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

const granted = (r: ReserveResult) => (r.ok ? r.reservation.amount.output : 0);

test(
  'servers on one store, some dropped without a word (kill -9), never grant more than the limit between them',
  withStore(async (store) => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 2000 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 2 }), fc.integer({ min: 1, max: 120 }), fc.boolean()), {
          maxLength: 60,
        }),
        async (limit, steps) => {
          const p = {
            ...policy({ output: limit }),
            id: `w1\u0000p${limit}-${steps.length}`,
            name: `p${limit}`,
          };
          for (const o of await store.list({ kind: BUDGET_WINDOW_KIND, workspace: 'w1', parent: p.name }))
            await store.write([{ op: 'delete', key: o }]);
          const servers = [0, 1, 2].map(() => new BudgetLedger(store, () => T0));
          let total = 0;
          await Promise.all(
            steps.map(async ([i, ask, kill]) => {
              const pending = servers[i].prepare([p]);
              if (pending) await pending;
              const r = await servers[i].reserve([p], { input: 0, output: ask });
              total += granted(r);
              if (r.ok) servers[i].settle(r.reservation, { input: 0, output: ask });
              // A server killed: its memory is gone, a new one starts on the same store.
              if (kill) servers[i] = new BudgetLedger(store, () => T0);
            }),
          );
          assert.ok(total <= limit, `${total} granted for a limit of ${limit}`);
        },
      ),
      { numRuns: 60 },
    );
  }),
);

test(
  'a server started again after a kill refuses what the first one spent, and loses at most a block',
  withStore(async (store) => {
    const p = policy({ output: 1000 });
    const first = new BudgetLedger(store, () => T0);
    let spent = 0;
    for (let i = 0; i < 10; i++) {
      const r = await first.reserve([p], { input: 0, output: 50 });
      assert.ok(r.ok);
      first.settle(r.reservation, { input: 0, output: 50 });
      spent += 50;
    }
    // Killed: no close, no give-back.
    const second = new BudgetLedger(store, () => T0);
    await second.prepare([p]);
    let more = 0;
    for (;;) {
      const r = await second.reserve([p], { input: 0, output: 50 });
      if (!r.ok) {
        assert.equal(r.inFlight, false, 'nothing of this server is in flight');
        assert.equal(r.policy, 'p');
        break;
      }
      second.settle(r.reservation, { input: 0, output: 50 });
      more += 50;
    }
    assert.ok(spent + more <= 1000);
    assert.ok(spent + more >= 1000 - blockOf(1000) - 50, `only ${spent + more} granted`);
    const [w] = await second.snapshot(p);
    assert.ok(w.used.output >= spent + more, 'the read-out counts what the killed server claimed as used');
  }),
);

test(
  'a server that stops gives back its unused claim, and the next one can grant all of the limit',
  withStore(async (store) => {
    const p = policy({ total: 600 });
    const first = new BudgetLedger(store, () => T0);
    const r = await first.reserve([p], { input: 10, output: 40 });
    assert.ok(r.ok);
    first.settle(r.reservation, { input: 10, output: 40 });
    await first.close();
    const second = new BudgetLedger(store, () => T0);
    let more = 0;
    for (;;) {
      const x = await second.reserve([p], { input: 10, output: 40 });
      if (!x.ok) break;
      second.settle(x.reservation, { input: 10, output: 40 });
      more += 50;
    }
    assert.equal(50 + more, 600);
  }),
);

test(
  'calls far from the limit reserve without waiting for the store once a block is claimed',
  withStore(async (store) => {
    const p = policy({ output: 1_000_000 });
    const ledger = new BudgetLedger(store, () => T0);
    await ledger.prepare([p]);
    let immediate = 0;
    for (let i = 0; i < 100; i++) {
      const r = ledger.reserve([p], { input: 0, output: 100 });
      if (!(r instanceof Promise)) immediate++;
      const x = await r;
      assert.ok(x.ok);
      ledger.settle(x.reservation, { input: 0, output: 100 });
    }
    assert.equal(immediate, 100, 'every call was reserved in memory');
  }),
);
