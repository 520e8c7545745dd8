import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { SqliteStore } from '../store/sqlite.js';
import { USAGE_KIND, UsageRecorder } from './usage-recorder.js';

const T = Date.UTC(2025, 0, 15, 10, 20);

test('samples fold into one row per model, key and hour, across flushes', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-usage-'));
  const store = new SqliteStore(join(dir, 'db'));
  try {
    const rec = new UsageRecorder(store);
    const sample = {
      workspace: 'w',
      model: 'm',
      keyId: 'ak-1',
      inputTokens: 10,
      outputTokens: 5,
      error: false,
      latencyMs: 100,
      at: T,
    };
    rec.add(sample);
    rec.add({ ...sample, error: true, latencyMs: 300 });
    await rec.flush();
    rec.add({ ...sample, at: T + 60_000 });
    rec.add({ ...sample, keyId: 'ak-2' });
    rec.add({ ...sample, at: T + 3_600_000 });
    await rec.close();
    const rows = await store.list({ kind: USAGE_KIND, workspace: 'w', parent: 'm' });
    assert.deepEqual(
      rows.map((r) => r.name),
      ['m.ak-1.2025-01-15T10', 'm.ak-1.2025-01-15T11', 'm.ak-2.2025-01-15T10'],
    );
    assert.deepEqual(rows[0].body, {
      model: 'm',
      keyId: 'ak-1',
      hour: '2025-01-15T10:00:00.000Z',
      inputTokens: 30,
      outputTokens: 15,
      requests: 3,
      errors: 1,
      latencyMsSum: 500,
    });
    const inRange = await rec.rows('w', 'm', T, T + 1000);
    assert.equal(inRange.length, 2, 'rows of the hour holding `from`, not the next hour');
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
