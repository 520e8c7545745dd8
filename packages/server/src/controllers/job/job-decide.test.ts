// The scheduler's pure decisions: caps per execution and overall, fairness, backoff, outcomes and statuses.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  afterAttempt,
  countTasks,
  executionStatus,
  pickStarts,
  RETRY_BASE_MS,
  RETRY_MAX_MS,
  retryAt,
} from './job-decide.js';

const waiting = (n: number, from = 0) => Array.from({ length: n }, (_, i) => ({ index: from + i }));

describe('job scheduling decisions', () => {
  it('never starts more than an execution allows, counting what already runs', () => {
    const picks = pickStarts([{ id: 'a', maxConcurrent: 5, running: 2, waiting: waiting(50) }], 100, 0);
    assert.deepEqual(
      picks.map((p) => p.index),
      [0, 1, 2],
    );
  });

  it('never starts more than the server-wide cap, whatever the executions allow', () => {
    const picks = pickStarts(
      [
        { id: 'a', maxConcurrent: 50, running: 0, waiting: waiting(50) },
        { id: 'b', maxConcurrent: 50, running: 0, waiting: waiting(50) },
      ],
      7,
      0,
    );
    assert.equal(picks.length, 7);
  });

  it('shares the global cap between executions in turn, so a big execution does not starve a small one', () => {
    const picks = pickStarts(
      [
        { id: 'big', maxConcurrent: 100, running: 0, waiting: waiting(100) },
        { id: 'small', maxConcurrent: 100, running: 0, waiting: waiting(2) },
      ],
      4,
      0,
    );
    assert.deepEqual(
      picks.map((p) => p.execution),
      ['big', 'small', 'big', 'small'],
    );
  });

  it("a workspace's quota room bounds its executions together, and another workspace's run beside them", () => {
    const rooms = new Map([
      ['a', { slots: 2, memoryMb: 10_000 }],
      ['b', { slots: 5, memoryMb: 10_000 }],
    ]);
    const held = new Set<string>();
    const picks = pickStarts(
      [
        { id: 'a1', maxConcurrent: 10, running: 0, waiting: waiting(10), room: 'a', taskMemoryMb: 256 },
        { id: 'a2', maxConcurrent: 10, running: 0, waiting: waiting(10), room: 'a', taskMemoryMb: 256 },
        { id: 'b1', maxConcurrent: 2, running: 0, waiting: waiting(10), room: 'b', taskMemoryMb: 256 },
      ],
      50,
      0,
      rooms,
      held,
    );
    const per = (id: string) => picks.filter((p) => p.execution === id).length;
    assert.deepEqual([per('a1'), per('a2'), per('b1')], [1, 1, 2]);
    assert.deepEqual([...held].sort(), ['a1', 'a2'], 'held by their room, not by their own cap');
    assert.equal(rooms.get('a')?.slots, 2, 'the rooms given are not changed');
  });

  it("a room's memory holds back tasks that do not fit, and lets a smaller one of another execution start", () => {
    const rooms = new Map([['a', { slots: 10, memoryMb: 1000 }]]);
    const picks = pickStarts(
      [
        { id: 'big', maxConcurrent: 10, running: 0, waiting: waiting(3), room: 'a', taskMemoryMb: 600 },
        { id: 'small', maxConcurrent: 10, running: 0, waiting: waiting(3), room: 'a', taskMemoryMb: 200 },
      ],
      50,
      0,
      rooms,
    );
    assert.deepEqual(
      picks.map((p) => p.execution),
      ['big', 'small', 'small'],
    );
  });

  it('skips a retry whose backoff has not elapsed and starts it once it has', () => {
    const e = { id: 'a', maxConcurrent: 5, running: 0, waiting: [{ index: 3, notBeforeMs: 1000 }] };
    assert.equal(pickStarts([e], 10, 999).length, 0);
    assert.deepEqual(pickStarts([e], 10, 1000), [{ execution: 'a', index: 3 }]);
  });

  it('doubles the backoff per attempt up to its cap', () => {
    assert.equal(retryAt(0, 1), RETRY_BASE_MS);
    assert.equal(retryAt(0, 2), 2 * RETRY_BASE_MS);
    assert.equal(retryAt(0, 30), RETRY_MAX_MS);
  });

  it('retries a failed attempt while retries remain, then fails it; a timeout ends as timeout', () => {
    const fail = { exitCode: 1, timedOut: false, cancelled: false };
    assert.equal(afterAttempt(fail, 1, 2, 0).status, 'pending');
    assert.equal(afterAttempt(fail, 2, 2, 0).status, 'pending');
    assert.equal(afterAttempt(fail, 3, 2, 0).status, 'failed');
    assert.equal(
      afterAttempt({ exitCode: 0, timedOut: false, cancelled: false }, 3, 2, 0).status,
      'succeeded',
    );
    assert.equal(
      afterAttempt({ exitCode: 143, timedOut: true, cancelled: false }, 1, 0, 0).status,
      'timeout',
    );
    assert.equal(
      afterAttempt({ exitCode: 0, timedOut: false, cancelled: true }, 1, 5, 0).status,
      'cancelled',
    );
  });

  it('derives the execution status from its tasks', () => {
    const c = (...s: Parameters<typeof countTasks>[0][]) => countTasks(s.flat() as never);
    assert.equal(executionStatus(c(['pending', 'pending']), false), 'pending');
    assert.equal(executionStatus(c(['running', 'pending']), false), 'running');
    assert.equal(executionStatus(c(['succeeded', 'succeeded']), false), 'succeeded');
    assert.equal(executionStatus(c(['succeeded', 'timeout']), false), 'failed');
    assert.equal(executionStatus(c(['running', 'cancelled']), true), 'cancelling');
    assert.equal(executionStatus(c(['succeeded', 'cancelled']), true), 'cancelled');
  });
});
