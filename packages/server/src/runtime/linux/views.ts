// Read-only views of the host directories a sandbox's root is made from that lie at a path of the host's own: the
// data dir's base-etc and image roots, the server's build and its node_modules. A bind of one of them would show
// in the sandbox's /proc/self/mountinfo with that path as the mount's root (the directory on its file system), and
// so name the data dir, its owner's home, where Berth is installed. A view is an overlay of the directory with its
// layer named "." (the mount helper enters the directory first): a file system of its own, so the sandbox sees "/"
// as the root and "lowerdir=.:/run/berth/empty" as its options (decision 041). Views are made for each sandbox
// start, not shared: an overlay keeps what it has looked up, so one made before a rebuild replaced files by rename
// would go on showing the old ones to sandboxes started after it.
import { chmod, mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { mountsUnderAsync } from './disk.js';
import { run } from './exec.js';
import { helped } from './drive-mount.js';
import { EMPTY_DIR, VIEWS_DIR } from './host.js';
import type { RootPlan } from './rootfs.js';

export const viewsDir = (name: string) => join(VIEWS_DIR, name);

/** Mounts a fresh view of each source for the sandbox `name` (its slot's name); returns their paths, in order. */
export async function mountViews(name: string, sources: string[]): Promise<string[]> {
  const dir = viewsDir(name);
  await unmountViews(name); // a previous holder of the slot may have died before its teardown
  await mkdir(dir, { recursive: true, mode: 0o711 });
  await chmod(dir, 0o711); // bwrap resolves the views as the sandbox's uid
  await helped(['view', EMPTY_DIR, dir, ...sources]);
  return sources.map((_, i) => join(dir, String(i)));
}

/**
 * Mounts the sandbox's root (rootfs.ts rootfsPlan) at `<views>/<name>/root`, each overlay's upper in the sandbox's
 * writable layer `rwDir`, its lowers id-mapped to the sandbox's host `uid`; returns the root's path. After mountViews
 * (which empties the directory) and once the layer is mounted. Torn down with the views.
 */
export async function mountRoot(name: string, rwDir: string, uid: number, plan: RootPlan): Promise<string> {
  const root = join(viewsDir(name), 'root');
  await mkdir(root, { mode: 0o711 });
  const args = ['root', String(uid), rwDir];
  for (const o of plan.overlays)
    args.push(o.target ? join(root, o.target) : root, o.name, String(o.lowers.length), ...o.lowers);
  await helped(args);
  return root;
}

/**
 * Unmounts the sandbox's views, all in one `umount` (the sandbox's own mount namespace keeps its binds of them until
 * it ends; lazily, so a view still in use on the host side cannot fail a teardown), and deletes their directory.
 */
export async function unmountViews(name: string): Promise<void> {
  const dir = viewsDir(name);
  const mounted = await mountsUnderAsync(dir);
  if (mounted.length) await run('umount', ['-l', ...mounted]);
  // The largest synchronous item of a teardown before decision 078 (rmdir of the views' mount points just left).
  await rm(dir, { recursive: true, force: true });
}
