// Fills a workspace's sealed dependency cache for a project from a node_modules tree already on disk (the
// repository's own), the way an install step with network would have sealed it (builds/dependency-cache.ts): tests
// build templates with no network.
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { entryDirOf, installInputs } from '../builds/dependency-cache.js';
import { planBuild } from '../builds/plan.js';

/**
 * Copies every package the project's package-lock.json lists from `fromRoot/node_modules` into the cache entry the
 * project's install inputs name in `workspace`, on the default image; returns the entry's directory.
 */
export function seedNodeCache(
  dataDir: string,
  workspace: string,
  projectDir: string,
  fromRoot: string,
): string {
  const inputs = installInputs(planBuild(projectDir), projectDir);
  if (inputs?.kind !== 'node') throw new Error(`seedNodeCache: ${projectDir} installs nothing cacheable`);
  const entry = entryDirOf(dataDir, workspace, inputs);
  const dest = join(entry, 'node_modules');
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
    cpSync(src, join(entry, path), { recursive: true, verbatimSymlinks: true });
  }
  cpSync(join(fromRoot, 'node_modules', '.bin'), join(dest, '.bin'), {
    recursive: true,
    verbatimSymlinks: true,
  });
  return entry;
}
