import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BACKOFF_BASE_MS, BACKOFF_MAX_MS, backoffMs, type QueueResult, WorkQueue } from './queue.js';

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { open, opened };
}

async function until(cond: () => boolean) {
  for (let i = 0; i < 2000 && !cond(); i++) await new Promise((r) => setTimeout(r, 2));
  assert.ok(cond(), 'condition not reached');
}

test('a name added many times while waiting is reconciled once', async () => {
  const g = gate();
  const runs: string[] = [];
  const q = new WorkQueue(
    async (name) => {
      runs.push(name);
      if (name === 'blocker') await g.opened;
      return { done: true };
    },
    { concurrency: 1 },
  );
  q.add('blocker');
  q.add('a');
  q.add('a');
  q.add('a');
  g.open();
  await until(() => q.depth === 0);
  assert.deepEqual(runs, ['blocker', 'a']);
  await q.stop();
});

test('a name is never reconciled twice at once; added while running, it runs once more after', async () => {
  const g = gate();
  let inFlight = 0;
  let maxInFlight = 0;
  let runs = 0;
  const q = new WorkQueue(async () => {
    runs++;
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    if (runs === 1) await g.opened;
    inFlight--;
    return { done: true };
  });
  q.add('a');
  await until(() => runs === 1);
  q.add('a');
  q.add('a');
  assert.equal(runs, 1);
  g.open();
  await until(() => runs === 2 && q.depth === 0);
  assert.equal(maxInFlight, 1);
  await q.stop();
  assert.equal(runs, 2);
});

test('the global cap bounds reconciles in flight across names', async () => {
  const g = gate();
  let inFlight = 0;
  let maxInFlight = 0;
  let finished = 0;
  const q = new WorkQueue(
    async () => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await g.opened;
      inFlight--;
      finished++;
      return { done: true };
    },
    { concurrency: 2 },
  );
  for (const n of ['a', 'b', 'c', 'd', 'e']) q.add(n);
  await until(() => inFlight === 2);
  g.open();
  await until(() => finished === 5);
  assert.equal(maxInFlight, 2);
  await q.stop();
});

test('a failing reconcile is retried with growing backoff until it succeeds', async () => {
  let calls = 0;
  const delays: number[] = [];
  const q = new WorkQueue(
    async () => {
      calls++;
      if (calls < 4) throw new Error(`failure ${calls}`);
      return { done: true };
    },
    { baseDelayMs: 1, maxDelayMs: 3, onError: (_n, _e, d) => delays.push(d) },
  );
  q.add('a');
  await until(() => calls === 4 && q.depth === 0);
  assert.deepEqual(delays, [1, 2, 3]);
  await q.stop();
});

test('the backoff doubles from 100 ms and stops at 30 s', () => {
  assert.equal(backoffMs(1), BACKOFF_BASE_MS);
  assert.equal(backoffMs(2), 200);
  assert.equal(backoffMs(5), 1600);
  assert.equal(backoffMs(100), BACKOFF_MAX_MS);
});

test('requeueAfterMs runs the name again later', async () => {
  const results: QueueResult[] = [{ requeueAfterMs: 1 }, { requeueAfterMs: 1 }, { done: true }];
  let calls = 0;
  const q = new WorkQueue(async () => results[calls++]);
  q.add('a');
  await until(() => calls === 3 && q.depth === 0);
  await q.stop();
  assert.equal(calls, 3);
});

test('stop aborts the signal, waits for reconciles in flight and takes no more work', async () => {
  let finished = false;
  let started = 0;
  const q = new WorkQueue(async (_name, signal) => {
    started++;
    await new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));
    await new Promise((r) => setTimeout(r, 5));
    finished = true;
    return { done: true };
  });
  q.add('a');
  await until(() => started === 1);
  await q.stop();
  assert.equal(finished, true);
  q.add('b');
  await new Promise((r) => setTimeout(r, 5));
  assert.equal(started, 1);
});

test('stop cancels pending retries', async () => {
  let calls = 0;
  const q = new WorkQueue(
    async () => {
      calls++;
      throw new Error('always');
    },
    { baseDelayMs: 20 },
  );
  q.add('a');
  await until(() => calls === 1);
  await q.stop();
  await new Promise((r) => setTimeout(r, 40));
  assert.equal(calls, 1);
});
