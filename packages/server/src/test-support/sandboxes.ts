// Sandboxes outlive the server that started them (a restarted server adopts them), so a test that throws
// its data dir away must remove the sandboxes that dir accounts for, or they keep running.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createLinuxDriver } from '../runtime/index.js';
import { mountsUnder } from '../runtime/linux/disk.js';
import { run } from '../runtime/linux/exec.js';
import { DRIVES_SUBDIR, VOLUMES_SUBDIR } from '../runtime/linux/volumes.js';

/** Removes every sandbox of `dataDir`'s runtime; costs nothing when it never ran one. */
export async function removeSandboxesIn(dataDir: string): Promise<void> {
  const dir = join(dataDir, 'sandboxes');
  if (!existsSync(dir) || readdirSync(dir).length === 0) return;
  // No network pool: this driver only tears down.
  const driver = await createLinuxDriver({ dataDir, netPoolSize: 0 });
  try {
    for (const info of await driver.list()) await driver.remove(info.id);
  } finally {
    await driver.close();
  }
}

/** Unmounts the volumes a test server's data dir holds (loop mounts outlive the server, as they must). */
export async function unmountVolumesIn(dataDir: string): Promise<void> {
  for (const sub of [VOLUMES_SUBDIR, DRIVES_SUBDIR])
    for (const mp of mountsUnder(join(dataDir, sub)))
      await run('umount', [mp]).catch(() => run('umount', ['-l', mp]));
}

/**
 * Deletes a thrown-away data dir in a detached `rm -rf` the test does not wait for. A data dir a build ran in holds
 * about 200 MB in 18,000 files, and the test host's root filesystem is mounted with online discard: deleting written
 * blocks waits on the disk for 5 to 20 s, which the test file's process used to wait out before it could end.
 * Call it once the dir's sandboxes are removed and its volumes unmounted; `--one-file-system` still leaves alone
 * anything mounted under it.
 */
export function removeDirLater(dir: string): void {
  spawn('rm', ['-rf', '--one-file-system', dir], { detached: true, stdio: 'ignore' }).unref();
}
