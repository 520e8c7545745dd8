// What a sandbox changed in its root, read back for a Dockerfile build (decision 051): the upper directory of its root
// overlay, copied out of its writable layer once nothing runs in it any more. GNU tar copies it as overlayfs wrote it
// (whiteouts as 0/0 character devices, the opaque mark as the trusted.overlay.opaque attribute) and gives every file
// to root: the copy becomes a lower layer of the build's next steps, id-mapped like every lower (files stored as 0 show
// as the sandbox's own user).
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { upperDir } from './disk.js';

const XATTRS = ['--xattrs', '--xattrs-include=trusted.overlay.opaque'];
/** Reading a layer a sandbox still writes: what changes or goes meanwhile is said with exit status 1, not 2. */
const LIVE = ['--warning=no-file-changed', '--warning=no-file-removed', '--ignore-failed-read'];

/** Copies the upper of the overlay `overlay` (the root's by default) of the layer `rwDir` into the empty directory `dest`. */
export async function copyChanges(
  rwDir: string,
  dest: string,
  overlay = 'root',
  /** The sandbox still runs: a file changed or removed while read is no failure (a catch-up copies it again). */
  live = false,
): Promise<void> {
  mkdirSync(dest, { recursive: true, mode: 0o755 });
  if (readdirSync(dest).length) throw new Error(`${dest} is not empty`);
  await pipeTar(
    ['-C', upperDir(rwDir, overlay), ...(live ? LIVE : []), ...XATTRS, '--numeric-owner', '-cf', '-', '.'],
    ['-C', dest, ...XATTRS, '--no-same-owner', '--same-permissions', '-xf', '-'],
    live ? [0, 1] : [0],
  );
}

/**
 * Copies the entries `list` (paths relative to `src`, each alone: a directory without its contents) from the overlay
 * upper `src` into the layer copy `dest`, as copyChanges copies them. The list goes through a file, NUL-separated.
 */
export async function copyEntries(
  src: string,
  dest: string,
  list: string[],
  listFile: string,
  /** The sandbox still runs: an entry changed or removed while read is no failure (the catch-up settles it). */
  live = false,
): Promise<void> {
  mkdirSync(dest, { recursive: true, mode: 0o755 });
  writeFileSync(listFile, `${list.map((r) => `./${r}`).join('\0')}\0`, { mode: 0o600 });
  try {
    await pipeTar(
      [
        '-C',
        src,
        ...(live ? LIVE : []),
        ...XATTRS,
        '--numeric-owner',
        '--no-recursion',
        '--null',
        '-T',
        listFile,
        '-cf',
        '-',
      ],
      ['-C', dest, ...XATTRS, '--no-same-owner', '--same-permissions', '-xf', '-'],
      live ? [0, 1] : [0],
    );
  } finally {
    rmSync(listFile, { force: true });
  }
}

/** `tar <from> | tar <to>`, failing with the stderr of whichever side failed. */
function pipeTar(from: string[], to: string[], senderOk: number[] = [0]): Promise<void> {
  return new Promise((resolve, reject) => {
    const a = spawn('tar', from, { stdio: ['ignore', 'pipe', 'pipe'] });
    const b = spawn('tar', to, { stdio: ['pipe', 'ignore', 'pipe'] });
    a.stdout.pipe(b.stdin);
    let err = '';
    a.stderr.on('data', (d) => {
      err += d;
    });
    b.stderr.on('data', (d) => {
      err += d;
    });
    let left = 2;
    let failed = false;
    const done = (code: number | null, ok: number[]) => {
      if (code === null || !ok.includes(code)) failed = true;
      if (--left > 0) return;
      if (failed) reject(new Error(`copying the sandbox's changes failed: ${err.trim().slice(0, 500)}`));
      else resolve();
    };
    a.on('error', reject);
    b.on('error', reject);
    a.on('close', (code) => done(code, senderOk));
    b.on('close', (code) => done(code, [0]));
  });
}
