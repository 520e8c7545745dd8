// Fills a workspace's sealed dependency cache for a project from a node_modules tree already on disk (the
// repository's own), the way an install step with network would have sealed it (builds/dependency-cache.ts): tests
// build templates with no network.
import {
  copyFileSync,
  cpSync,
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { join } from 'node:path';
import { entryDirOf, installInputs } from '../builds/dependency-cache.js';
import { planBuild } from '../builds/plan.js';

/**
 * `src`'s tree at `dest` with every file a hard link to its original (symlinks kept as written), replacing what is
 * there, as cpSync would. Writing a template's packages (about 100 MB, 9,000 files) and deleting them again cost more
 * than its build on the test host: the root filesystem is mounted with online discard, so deleting written blocks
 * waits on the disk, while a link's blocks stay in use by the original. A copy where links cannot reach.
 */
function linkTree(src: string, dest: string): void {
  mkdirSync(dest, { recursive: true });
  for (const e of readdirSync(src, { withFileTypes: true })) {
    const from = join(src, e.name);
    const to = join(dest, e.name);
    if (e.isDirectory()) {
      linkTree(from, to);
      continue;
    }
    rmSync(to, { force: true });
    if (e.isSymbolicLink()) symlinkSync(readlinkSync(from), to);
    else
      try {
        linkSync(from, to);
      } catch {
        copyFileSync(from, to);
      }
  }
}

/**
 * Copies every package the project's package-lock.json lists from `fromRoot/node_modules` into the cache entry the
 * project's install inputs name in `workspace`, on the default image; returns the entry's directory. The files are
 * hard links to `fromRoot`'s (a build mounts the entry read-only, so none is written through them) unless `copy`: a
 * test whose build tries to write into the cache takes copies, so that a regression there damages its own entry,
 * not the repository's node_modules.
 */
export function seedNodeCache(
  dataDir: string,
  workspace: string,
  projectDir: string,
  fromRoot: string,
  opts: { copy?: boolean } = {},
): string {
  const inputs = installInputs(planBuild(projectDir), projectDir);
  if (inputs?.kind !== 'node') throw new Error(`seedNodeCache: ${projectDir} installs nothing cacheable`);
  const entry = entryDirOf(dataDir, workspace, inputs);
  const dest = join(entry, 'node_modules');
  const place = (from: string, to: string) =>
    opts.copy ? cpSync(from, to, { recursive: true, verbatimSymlinks: true }) : linkTree(from, to);
  rmSync(entry, { recursive: true, force: true });
  const lock = JSON.parse(readFileSync(join(projectDir, 'package-lock.json'), 'utf8'));
  for (const [path, meta] of Object.entries<any>(lock.packages ?? {})) {
    if (!path) continue;
    const name = path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
    const src = [join(fromRoot, path), join(fromRoot, 'node_modules', name)].find((p) => existsSync(p));
    if (!src) {
      if (meta.optional) continue;
      throw new Error(`seedNodeCache: ${path} is not in ${fromRoot}`);
    }
    mkdirSync(join(entry, path, '..'), { recursive: true });
    place(src, join(entry, path));
  }
  place(join(fromRoot, 'node_modules', '.bin'), join(dest, '.bin'));
  return entry;
}
