// Fills a workspace's dependency cache for a project's lockfile from a node_modules tree already on disk (the
// repository's own), the way a build with network would have left it: tests build templates with no network.
import { cpSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cacheKeyOf } from '../builds/plan.js';

/** Copies every package the lockfile lists from `fromRoot/node_modules` into the cache entry of that lockfile. */
export function seedNodeCache(
  dataDir: string,
  workspace: string,
  projectDir: string,
  fromRoot: string,
): string {
  const lockBytes = readFileSync(join(projectDir, 'package-lock.json'));
  const key = cacheKeyOf(lockBytes, process.versions.node.split('.')[0], process.arch);
  const dest = join(dataDir, 'builds', 'deps', workspace, 'node', key);
  const lock = JSON.parse(lockBytes.toString('utf8'));
  for (const [path, meta] of Object.entries<any>(lock.packages ?? {})) {
    if (!path) continue;
    const name = path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
    const src = [join(fromRoot, path), join(fromRoot, 'node_modules', name)].find((p) => existsSync(p));
    if (!src) {
      if (meta.optional) continue;
      throw new Error(`seedNodeCache: ${path} is not in ${fromRoot}`);
    }
    mkdirSync(join(dest, path, '..'), { recursive: true });
    cpSync(src, join(dest, path), { recursive: true, verbatimSymlinks: true });
  }
  cpSync(join(fromRoot, 'node_modules', '.bin'), join(dest, 'node_modules', '.bin'), {
    recursive: true,
    verbatimSymlinks: true,
  });
  return key;
}
