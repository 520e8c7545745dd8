// What the sandbox runtime needs to find in an image root, added once when the root is built (the root is
// read-only afterwards, and bubblewrap cannot create a mount point inside a read-only bind): the directories under
// /opt where Berth's own code, its dependencies and the host's userland appear, and the /etc files Berth
// generates per host (hosts, hostname, resolv.conf) as plain files to bind over.
import { chmodSync, lstatSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const OPT_MOUNT_POINTS = ['opt/berth', 'opt/berth-bin', 'opt/node_modules', 'opt/berth-host'];
export const ETC_GENERATED = ['hosts', 'hostname', 'resolv.conf'];

function ensureDir(p: string): void {
  const st = lstatSync(p, { throwIfNoEntry: false });
  if (st?.isDirectory()) return;
  if (st) rmSync(p, { recursive: true, force: true }); // an image's /opt symlink or file: the runtime owns it
  mkdirSync(p);
  chmodSync(p, 0o755); // not left to the umask: the server's is 077, and every sandbox uid must read these
}

export function finishRoot(root: string): void {
  ensureDir(join(root, 'opt'));
  for (const m of OPT_MOUNT_POINTS) ensureDir(join(root, m));
  ensureDir(join(root, 'etc'));
  for (const f of ETC_GENERATED) {
    const p = join(root, 'etc', f);
    const st = lstatSync(p, { throwIfNoEntry: false });
    if (st?.isFile()) continue;
    if (st) rmSync(p, { recursive: true, force: true });
    writeFileSync(p, '');
    chmodSync(p, 0o644);
  }
}
