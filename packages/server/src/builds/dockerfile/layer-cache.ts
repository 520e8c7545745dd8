// The layers a workspace's Dockerfile builds made, by the key of the step that made them (decision 051): the step's
// parent key, its instruction as expanded and its inputs (the files a COPY takes, the environment a RUN sees), so a
// rebuild with nothing changed makes nothing and a changed COPY source makes that step and the ones after it again.
// Per workspace (`<builds>/workspaces/<ws>/image-cache`, deleted with the workspace): a layer one workspace made is
// never offered to another, whatever its key (decision 036).
//   <key>/          the layer as overlayfs keeps one: a lower of the build's later steps
//   <key>.json      its packed form {digest, size, diffId, mediaType}: the blob is packed again (the same bytes) when
//                   the image store has collected it
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import type { PackedLayer } from '../../runtime/images/layer-pack.js';
import { workspaceBuildsDir } from '../layout.js';

export interface CachedLayer {
  key: string;
  dir: string;
  packed: PackedLayer;
}

const KEY = /^[a-f0-9]{64}$/;

export class LayerCache {
  readonly dir: string;

  constructor(dataDir: string, workspace: string) {
    this.dir = join(workspaceBuildsDir(dataDir, workspace), 'image-cache');
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
  }

  get(key: string): CachedLayer | undefined {
    if (!KEY.test(key)) return undefined;
    const meta = join(this.dir, `${key}.json`);
    const dir = join(this.dir, key);
    if (!existsSync(meta) || !existsSync(dir)) return undefined;
    const now = new Date();
    utimesSync(meta, now, now); // when it was last used, for a prune
    return { key, dir, packed: JSON.parse(readFileSync(meta, 'utf8')) };
  }

  /** A private directory beside the cache, on its file system (a layer made there is renamed into place). */
  scratch(name: string): string {
    const d = join(this.dir, `.tmp-${name}`);
    rmSync(d, { recursive: true, force: true });
    mkdirSync(d, { mode: 0o700 });
    return d;
  }

  /** Keeps the layer made in `made` under `key`; a concurrent build that kept one first wins (same key, same step). */
  put(key: string, made: string, packed: PackedLayer): CachedLayer {
    const dir = join(this.dir, key);
    if (!existsSync(dir)) {
      try {
        renameSync(made, dir);
      } catch {
        rmSync(made, { recursive: true, force: true });
      }
    } else rmSync(made, { recursive: true, force: true });
    const meta = join(this.dir, `${key}.json`);
    writeFileSync(`${meta}.tmp`, JSON.stringify(packed));
    renameSync(`${meta}.tmp`, meta);
    return { key, dir, packed };
  }

  /** Everything (a cleanup); scratch of builds under way stays. Returns how many layers went. */
  clear(): number {
    let n = 0;
    for (const e of readdirSync(this.dir)) {
      if (e.startsWith('.tmp-')) continue;
      if (e.endsWith('.json')) n++;
      rmSync(join(this.dir, e), { recursive: true, force: true });
    }
    return n;
  }

  /** Scratch left by a server killed mid-build. */
  sweep(inUse: (name: string) => boolean): void {
    for (const e of readdirSync(this.dir))
      if (e.startsWith('.tmp-') && !inUse(e.slice(5)))
        rmSync(join(this.dir, e), { recursive: true, force: true });
  }
}
