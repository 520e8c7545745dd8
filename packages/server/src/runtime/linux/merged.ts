// A build's stage read as one tree by the server (decision 051): its layer directories and its image's root merged by a
// read-only overlay mounted on the host for as long as a callback runs (COPY --from, the stage's /etc/passwd for USER,
// whether a WORKDIR exists). Whiteouts and opaque directories of the layers apply, as they do in a build sandbox.
import { mkdtempSync, rmdirSync } from 'node:fs';
import { join } from 'node:path';
import { helped } from './drive-mount.js';
import { EMPTY_DIR } from './host.js';
import { run } from './exec.js';

/** Runs `fn` with the lowers (topmost first) merged at a private mount point; unmounted after, whatever happened. */
export async function withMerged<T>(
  scratch: string,
  lowers: string[],
  fn: (root: string) => Promise<T>,
): Promise<T> {
  const layers = lowers.filter((l) => l !== EMPTY_DIR);
  if (!layers.length) return fn(EMPTY_DIR); // nothing at all (scratch, before its first layer)
  const dir = mkdtempSync(join(scratch, 'merged-'));
  try {
    // The helper adds the empty directory below (an overlay needs two layers): the empty image (scratch) is it.
    await helped(['merge', dir, ...layers]);
    try {
      return await fn(dir);
    } finally {
      await run('umount', [dir]).catch(() => run('umount', ['-l', dir]));
    }
  } finally {
    rmdirSync(dir); // never recursive: a mount point still in use must not be emptied through
  }
}
