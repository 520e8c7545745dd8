// Durability: kill -9 `berth serve` in the middle of a burst of writes; after a restart every write that was
// acknowledged with 200 is there, whole, and nothing half-written exists.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

const BIN = join(import.meta.dirname, '../../cli/bin/berth.mjs');

function serve(dataDir: string): Promise<{ child: ChildProcess; url: string; exited: Promise<unknown> }> {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--data-dir', dataDir], {
    env: { ...process.env, BERTH_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  // Listen for the exit now: after a SIGKILL it may come before the test gets to wait for it.
  const exited = new Promise((r) => child.once('exit', r));
  return new Promise((resolve, reject) => {
    let out = '';
    const early = (c: unknown) => reject(new Error(`berth serve exited with ${c}`));
    child.once('exit', early);
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /berth listening on (\S+)/.exec(out);
      if (m) {
        child.off('exit', early);
        resolve({ child, url: m[1], exited });
      }
    });
  });
}

test('every acknowledged write survives kill -9 and no partial object exists', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-durability-'));
  try {
    const first = await serve(dataDir);
    const key = readFileSync(join(dataDir, 'admin.key'), 'utf8').trim();
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const acked = new Map<string, number>();
    let stop = false;
    let n = 0;
    const writer = async () => {
      while (!stop) {
        const name = `p-${n++}`;
        const output = n * 7;
        try {
          const r = await fetch(`${first.url}/v0/policies`, {
            method: 'POST',
            headers,
            body: JSON.stringify({
              metadata: { name, labels: { burst: 'yes' } },
              spec: { type: 'maxToken', maxTokens: { output } },
            }),
          });
          if (r.status === 200) acked.set(name, output);
          await r.arrayBuffer();
        } catch {
          return; // the server is gone
        }
      }
    };
    const writers = Array.from({ length: 16 }, writer);
    while (acked.size < 300) await new Promise((r) => setTimeout(r, 5));
    first.child.kill('SIGKILL');
    stop = true;
    await Promise.all(writers);
    await first.exited;

    const second = await serve(dataDir);
    try {
      const all: any[] = [];
      let cursor = '';
      for (;;) {
        const r = await fetch(`${second.url}/v0/policies?limit=1000${cursor ? `&cursor=${cursor}` : ''}`, {
          headers,
        });
        assert.equal(r.status, 200);
        all.push(...((await r.json()) as any[]));
        cursor = r.headers.get('x-next-cursor') ?? '';
        if (!cursor) break;
      }
      const stored = new Map(all.map((p) => [p.metadata.name, p]));
      for (const [name, output] of acked) {
        const p = stored.get(name);
        assert.ok(p, `acknowledged ${name} is missing after kill -9`);
        assert.equal(p.spec.maxTokens.output, output);
      }
      for (const p of all) {
        assert.equal(p.spec.type, 'maxToken', `partial object ${p.metadata.name}`);
        assert.equal(p.metadata.labels.burst, 'yes');
        assert.ok(p.metadata.createdAt);
      }
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
