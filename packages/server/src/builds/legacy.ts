// A data dir from before decision 036 kept builds in global folders: apps and logs keyed without the workspace
// (`builds/apps/<key>`, `builds/logs/<key>.log`), dependency caches that builds' own code could write
// (`builds/deps/<ws>`, `builds/deps-images/<image>/<ws>`), and sources by digest for every workspace at once
// (`builds/code/<sha>.zip`). An app or cache entry of then may have been poisoned, and nothing says which workspace's
// build made it, so none is used again: revisions naming such an app are built again from their source, under their
// own workspace, by their next deploy. Sources are the bytes a tenant uploaded, checked by their digest: each is
// copied into every workspace whose records name it, so that the rebuild has it.
import { copyFileSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Store } from '../store/store.js';
import { CODE_KINDS, sourceDigests } from './code-copies.js';
import type { CodeStore } from './code-store.js';
import { EVERY_WORKSPACE } from '../store/store.js';

/** The global folders of before; what is not a source is removed. */
const LEGACY_DIRS = ['apps', 'logs', 'deps', 'deps-images'];
/** Where they wait while a job task of an earlier server may still run a legacy app (its /app is bound there). */
const WAITING = 'legacy';

export interface LegacyUpgrade {
  /** Sources copied into a workspace. */
  sources: number;
  /** Whether the legacy apps and caches are gone (else they wait, unused, for a start with no earlier task). */
  removed: boolean;
}

/**
 * Moves a data dir's builds to the per-workspace layout: sources into the workspaces that name them, everything
 * else out of use. `earlierTasksRunning`: a job task sandbox of an earlier server still runs (it may run a legacy
 * app, so its files stay, out of any lookup, until a later start). Idempotent; nothing to do on a new data dir.
 */
export async function upgradeLegacyBuilds(o: {
  dataDir: string;
  store: Store;
  code: CodeStore;
  earlierTasksRunning: boolean;
}): Promise<LegacyUpgrade> {
  const root = join(o.dataDir, 'builds');
  const legacyCode = join(root, 'code');
  let sources = 0;
  if (existsSync(legacyCode)) {
    for (const kind of CODE_KINDS)
      for (const obj of await o.store.list({ workspace: EVERY_WORKSPACE, kind })) {
        for (const digest of sourceDigests(obj.body)) {
          const from = join(legacyCode, `${digest.slice('sha256:'.length)}.zip`);
          if (!existsSync(from) || o.code.has(obj.workspace, digest)) continue;
          mkdirSync(o.code.dirOf(obj.workspace), { recursive: true, mode: 0o700 });
          copyFileSync(from, o.code.pathOf(obj.workspace, digest));
          sources++;
        }
      }
    rmSync(legacyCode, { recursive: true, force: true });
  }
  const waiting = join(root, WAITING);
  if (!o.earlierTasksRunning) {
    for (const d of [...LEGACY_DIRS, WAITING]) rmSync(join(root, d), { recursive: true, force: true });
    return { sources, removed: true };
  }
  for (const d of LEGACY_DIRS) {
    if (!existsSync(join(root, d))) continue;
    mkdirSync(waiting, { recursive: true, mode: 0o700 });
    renameSync(join(root, d), join(waiting, `${d}-${readdirSync(waiting).length}`));
  }
  return { sources, removed: false };
}
