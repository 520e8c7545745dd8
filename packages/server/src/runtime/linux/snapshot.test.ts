// Snapshot captures on a real sandbox (needs root, decision 053): the copy made while the sandbox runs and caught up
// frozen is the sandbox's upper as tar reads it (modes, times, symbolic and hard links, whiteouts, opaque
// directories), and a wake-up asked during the frozen catch-up waits for it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { extract } from 'tar-stream';
import { smallSandboxSpec } from '../../test-support/sandbox-spec.js';
import { SandboxCgroup } from './cgroup.js';
import { copyChanges } from './changes.js';
import { createLinuxDriver, type LinuxDriver } from './linux-driver.js';
import { makeMiniDaemonCodeDir, sandboxExec } from './test-support/mini-daemon.js';

const T = { timeout: 60_000 };
let dataDir: string;
let driver: LinuxDriver;

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'berth-snapshot-'));
  driver = await createLinuxDriver({
    codeDir: makeMiniDaemonCodeDir(dataDir),
    dataDir: join(dataDir, 'driver'),
    warmPoolSize: 0,
    netPoolSize: 0,
    deepStandbyAfterS: 0,
  });
});

after(async () => {
  for (const i of await driver.list()) await driver.remove(i.id);
  await driver.close();
  rmSync(dataDir, { recursive: true, force: true });
});

/** Every entry of a tree as GNU tar reads it (type, mode, mtime, size, link, device, opaque mark, content hash). */
function treeOf(dir: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const tar = spawn(
      'tar',
      [
        '-C',
        dir,
        '--xattrs',
        '--xattrs-include=trusted.overlay.opaque',
        '--format=posix',
        '--sort=name',
      ].concat(['-cf', '-', '.']),
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const out: string[] = [];
    const ex = extract();
    ex.on('entry', (h, stream, next) => {
      const hash = createHash('sha256');
      stream.on('data', (d) => {
        hash.update(d as Buffer);
      });
      stream.on('end', () => {
        const pax = (h.pax ?? {}) as Record<string, string>;
        out.push(
          [
            h.name,
            h.type,
            (h.mode ?? 0).toString(8),
            Math.floor((h.mtime?.getTime() ?? 0) / 1000),
            h.size,
            h.linkname ?? '',
            `${h.devmajor ?? ''}:${h.devminor ?? ''}`,
            pax['SCHILY.xattr.trusted.overlay.opaque'] ?? '',
            h.type === 'file' ? hash.digest('hex').slice(0, 16) : '',
          ].join(' '),
        );
        next();
      });
    });
    ex.on('finish', () => resolve(out));
    ex.on('error', reject);
    tar.on('error', reject);
    tar.stdout.pipe(ex);
  });
}

test(
  'a capture is the sandbox’s upper as tar reads it: modes, times, links, whiteouts, opaque directories',
  T,
  async () => {
    const info = await driver.ensure('copy', smallSandboxSpec());
    const sh = async (cmd: string) => {
      const r = await sandboxExec(info.socketPath, cmd);
      assert.equal(r.code, 0, JSON.stringify(r));
      return r.stdout.trim();
    };
    await sh(
      [
        'cd /workspace && mkdir -p a/b && echo one > a/b/f && chmod 640 a/b/f && touch -d 2001-02-03 a/b/f',
        'head -c 3000000 /dev/urandom > big && ln big big-link && ln -s a/b/f sym && chmod 700 a',
        'd=$(ls -d /usr/share/*/ | head -1) && rm -rf "$d" && mkdir "$d" && echo new > "$d/only"',
        'f=$(ls /usr/share/*/* -d | grep -v "^$d" | head -1); rm -rf "$f"',
      ].join(' && '),
    );
    const layer = driver.layerDir(info.id) as string;
    const dest = join(dataDir, 'captured');
    const { pausedMs } = await driver.captureChanges(info.id, dest);
    assert.ok(pausedMs >= 0);
    // The reference: the tar copy of the first pass (changes.ts), made with the sandbox frozen.
    await driver.freeze(info.id);
    try {
      for (const overlay of ['root', 'usr']) {
        const ref = join(dataDir, `ref-${overlay}`);
        await copyChanges(layer, ref, overlay);
        const [got, want] = [await treeOf(join(dest, overlay)), await treeOf(ref)];
        assert.ok(
          want.some((e) => e.includes('character-device')) || overlay === 'root',
          'a whiteout is there',
        );
        assert.ok(
          want.some((e) => / y [0-9a-f]*$/.test(e)) || overlay === 'root',
          'an opaque directory is there',
        );
        assert.deepEqual(got.slice(1), want.slice(1)); // the top directory is made by the capture, not copied
      }
    } finally {
      await driver.thaw(info.id);
    }
  },
);

test('a wake-up asked during a capture’s frozen catch-up waits for it to end', T, async () => {
  const info = await driver.ensure('race', smallSandboxSpec());
  await sandboxExec(info.socketPath, 'cd /workspace && for i in $(seq 200); do echo $i > f$i; done');
  await driver.freeze(info.id); // in standby
  const { isFrozen, thaw } = SandboxCgroup.prototype;
  let thawed: Promise<void> | undefined;
  let askedAt = 0;
  let thawedAt = 0;
  // The capture asks whether the sandbox is frozen just before its catch-up begins (its pause is timed from
  // there): a request wakes it at that instant. The cgroup's thaw is when the kernel lets it run again.
  SandboxCgroup.prototype.isFrozen = function (this: SandboxCgroup) {
    const frozen = isFrozen.call(this);
    if (!thawed && new Error().stack?.includes('captureLayer')) {
      askedAt = performance.now();
      thawed = driver.thaw(info.id);
    }
    return frozen;
  };
  SandboxCgroup.prototype.thaw = function (this: SandboxCgroup) {
    thawedAt ||= performance.now();
    thaw.call(this);
  };
  let pausedMs: number;
  try {
    ({ pausedMs } = await driver.captureChanges(info.id, join(dataDir, 'race')));
    assert.ok(thawed, 'the wake-up was asked during the capture');
    await thawed;
  } finally {
    Object.assign(SandboxCgroup.prototype, { isFrozen, thaw });
  }
  // Causal, not a timing bound: the thaw waited for the whole catch-up, so it came at least its length after the ask
  // (the first pass's code thawed within the ask itself, microseconds after it).
  assert.ok(
    thawedAt - askedAt >= pausedMs,
    `thawed ${thawedAt - askedAt} ms after the ask, the catch-up lasted ${pausedMs} ms`,
  );
  assert.equal(driver.cgroup(info.id)?.isFrozen(), false, 'and then it was thawed');
});
