// The standby decision is pure: a snapshot and a time in, what to freeze and whose usage to write out.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decide, type IdleInput } from './idle-decide.js';
import { LAST_USED_WRITE_INTERVAL_MS } from './usage-writer.js';

const STANDBY_MS = 15_000;
const NOW = 100_000;

const box = (ref: string, over: Partial<IdleInput<string>> = {}): IdleInput<string> => ({
  ref,
  recorded: true,
  status: 'DEPLOYED',
  frozen: false,
  transitioning: false,
  inflight: 0,
  lastUsedMs: NOW - STANDBY_MS,
  writtenLastUsedMs: NOW - STANDBY_MS,
  writtenAtMs: NOW - STANDBY_MS,
  ...over,
});

test('an idle sandbox is frozen; one in flight, held by keepAlive, or not idle long enough is not', () => {
  const d = decide(
    [
      box('idle'),
      box('inflight', { inflight: 1 }),
      box('keepalive', { keepAliveUntilMs: NOW + 1 }),
      box('not-yet', { lastUsedMs: NOW - STANDBY_MS + 1, writtenLastUsedMs: NOW - STANDBY_MS + 1 }),
      box('keepalive-expired', { keepAliveUntilMs: NOW }),
    ],
    NOW,
    STANDBY_MS,
  );
  assert.deepEqual(d.freeze, ['idle', 'keepalive-expired']);
});

test('only a DEPLOYED, running sandbox with no transition under way is frozen', () => {
  const d = decide(
    [
      box('deploying', { status: 'DEPLOYING' }),
      box('frozen', { frozen: true }),
      box('transitioning', { transitioning: true }),
    ],
    NOW,
    STANDBY_MS,
  );
  assert.deepEqual(d.freeze, []);
});

test('usage is written when the sandbox was used since the last write, at most every interval', () => {
  const used = NOW - 1;
  const d = decide(
    [
      box('due', { lastUsedMs: used, writtenAtMs: NOW - LAST_USED_WRITE_INTERVAL_MS }),
      box('too-soon', { lastUsedMs: used, writtenAtMs: NOW - LAST_USED_WRITE_INTERVAL_MS + 1 }),
      box('unchanged', { lastUsedMs: used, writtenLastUsedMs: used, writtenAtMs: 0 }),
    ],
    NOW,
    STANDBY_MS,
  );
  assert.deepEqual(d.recordUsage, ['due']);
  assert.deepEqual(d.freeze, [], 'none of them is idle');
});
