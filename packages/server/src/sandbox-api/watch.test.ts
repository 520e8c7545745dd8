import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { enc, startSandboxDaemon, type TestDaemon } from '../test-support/sandbox-daemon.js';
import type { FileEvent } from './schema.js';

/** Bound on waiting for one event, so a lost event fails with what was seen instead of hanging the file. */
const WAIT_MS = 20_000;

let d: TestDaemon;
before(async () => {
  d = await startSandboxDaemon();
});
after(() => d.close());

/** Opens a watch and collects its events; the watch is armed once the response headers arrived. */
async function watch(path: string, query = '') {
  const ctrl = new AbortController();
  const res = await d.fetch(`/watch/filesystem/${path}${query}`, { signal: ctrl.signal });
  assert.equal(res.status, 200);
  const events: FileEvent[] = [];
  const waiters: (() => void)[] = [];
  const reader = res.body!.getReader();
  (async () => {
    let buf = '';
    const dec = new TextDecoder();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf += dec.decode(value, { stream: true });
        const lines = buf.split('\n');
        buf = lines.pop()!;
        for (const l of lines) {
          if (!l.trim() || l.startsWith('[keepalive]')) continue;
          events.push(JSON.parse(l));
          for (const w of waiters.splice(0)) w();
        }
      }
    } catch {
      // aborted
    }
  })();
  return {
    events,
    async waitFor(pred: (e: FileEvent) => boolean): Promise<FileEvent> {
      const deadline = Date.now() + WAIT_MS;
      for (;;) {
        const hit = events.find(pred);
        if (hit) return hit;
        if (Date.now() > deadline)
          assert.fail(`no matching event in ${WAIT_MS} ms; saw ${JSON.stringify(events)}`);
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 250);
        });
      }
    },
    close: () => ctrl.abort(),
  };
}

describe('watch', () => {
  test('a new file in the watched directory is a CREATE with its name and directory', async () => {
    mkdirSync(join(d.root, 'w1'));
    const w = await watch(enc(join(d.root, 'w1')));
    writeFileSync(join(d.root, 'w1', 'new.txt'), 'x');
    const e = await w.waitFor((x) => x.name === 'new.txt' && x.op === 'CREATE');
    assert.equal(e.path, join(d.root, 'w1'));
    assert.equal(e.error, null);
    writeFileSync(join(d.root, 'w1', 'new.txt'), 'y');
    await w.waitFor((x) => x.name === 'new.txt' && x.op === 'WRITE');
    chmodSync(join(d.root, 'w1', 'new.txt'), 0o600);
    await w.waitFor((x) => x.name === 'new.txt' && x.op === 'CHMOD');
    rmSync(join(d.root, 'w1', 'new.txt'));
    await w.waitFor((x) => x.name === 'new.txt' && x.op === 'REMOVE');
    w.close();
  });

  test('path/** watches the whole tree, including directories made after it started', async () => {
    mkdirSync(join(d.root, 'w2', 'a'), { recursive: true });
    const w = await watch(`w2${enc('/**')}`);
    writeFileSync(join(d.root, 'w2', 'a', 'deep.txt'), 'x');
    const e = await w.waitFor((x) => x.name === 'deep.txt');
    assert.equal(e.op, 'CREATE');
    assert.equal(e.path, join(d.root, 'w2', 'a'));
    mkdirSync(join(d.root, 'w2', 'b'));
    await w.waitFor((x) => x.name === 'b' && x.op === 'CREATE');
    writeFileSync(join(d.root, 'w2', 'b', 'later.txt'), 'x');
    await w.waitFor((x) => x.name === 'later.txt' && x.op === 'CREATE');
    w.close();
  });

  test('ignore drops events whose path contains a pattern', async () => {
    mkdirSync(join(d.root, 'w3'));
    const w = await watch('w3', '?ignore=skip-me');
    writeFileSync(join(d.root, 'w3', 'skip-me.log'), 'x');
    writeFileSync(join(d.root, 'w3', 'keep.txt'), 'x');
    await w.waitFor((x) => x.name === 'keep.txt');
    assert.ok(!w.events.some((x) => x.name === 'skip-me.log'));
    w.close();
  });

  test('watching a file or a missing directory is refused', async () => {
    writeFileSync(join(d.root, 'plain.txt'), 'x');
    assert.equal((await d.fetch('/watch/filesystem/plain.txt')).status, 400);
    assert.equal((await d.fetch('/watch/filesystem/nope')).status, 404);
  });
});
