// A followed build log: what was written, then what is appended while the build runs, and the end once it stops.
import assert from 'node:assert/strict';
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { followLog } from './log-follow.js';

const collect = async (gen: AsyncGenerator<Buffer>) => {
  let s = '';
  for await (const b of gen) s += b.toString();
  return s;
};

describe('followLog', () => {
  it('yields appended lines while the build runs and ends with the last bytes written before it stopped', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-follow-'));
    const log = join(dir, 'b.log');
    // Each pause of the follower is one build step: the log does not exist, then grows, then the build ends.
    const steps = [
      () => writeFileSync(log, 'one\n'),
      () => appendFileSync(log, 'two\n'),
      () => {
        appendFileSync(log, 'three\n');
        running = false;
      },
    ];
    let running = true;
    let created = false;
    const text = await collect(
      followLog({
        path: () => (created ? log : undefined),
        live: () => running,
        sleep: async () => {
          created = true;
          steps.shift()?.();
        },
      }),
    );
    assert.equal(text, 'one\ntwo\nthree\n');
    rmSync(dir, { recursive: true, force: true });
  });

  it('a finished build is read once and ends', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-follow-'));
    const log = join(dir, 'b.log');
    writeFileSync(log, 'done\n');
    let sleeps = 0;
    const text = await collect(
      followLog({
        path: () => log,
        live: () => false,
        sleep: async () => {
          sleeps++;
        },
      }),
    );
    assert.equal(text, 'done\n');
    assert.equal(sleeps, 0);
    rmSync(dir, { recursive: true, force: true });
  });

  it('stops when the reader goes away', async () => {
    const ac = new AbortController();
    let sleeps = 0;
    const text = await collect(
      followLog({
        path: () => undefined,
        live: () => true,
        signal: ac.signal,
        sleep: async () => {
          if (++sleeps === 3) ac.abort();
        },
      }),
    );
    assert.equal(text, '');
    assert.equal(sleeps, 3);
  });
});
