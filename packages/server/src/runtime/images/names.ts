// The image store's names (docs/decisions/037-image-names-per-workspace.md), two tables that never mix:
//   names/<workspace>.json  {"<canonical name>": "<image id hex>"}: what a workspace pulled or imported under a name;
//                           only that workspace's own pulls and imports write it, only its own lookups read it.
//   registry/<key>.json     {reference, id, digest}: what a pull from the name's registry got; only a pull writes it,
//                           so an import under a registry's name (`python:3.12-slim`) never changes what it stands for.
//   gone/<workspace>.json   {"<canonical name> <id hex>": "<when>"}: names the workspace let go of (a delete, a tag
//                           moved), kept GONE_KEPT_MS so the nodes of a cluster remove their copies of them rather
//                           than bring them back (images-ahead.ts, docs/decisions/087-images-ahead.md).
// Images themselves (blobs, roots) are content-addressed and shared; names are not.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NAME_PATTERN } from '../../kinds/common.js';

const WORKSPACE = new RegExp(NAME_PATTERN);
/** How long a name let go of is remembered (a node down longer than this may bring its copy back). */
export const GONE_KEPT_MS = 30 * 24 * 3600_000;
/** The key of a name let go of: the name and the image it stood for. */
export const goneKey = (canonical: string, idHex: string) => `${canonical} ${idHex}`;
const keyOf = (canonical: string) => createHash('sha256').update(canonical).digest('hex').slice(0, 32);

/** A workspace's names: canonical reference → image id (hex, no `sha256:`). */
export type NameTable = Map<string, string>;

export class ImageNames {
  private readonly namesDir: string;
  private readonly registryDir: string;
  private readonly deployedDir: string;
  private readonly goneDir: string;

  constructor(storeDir: string) {
    this.namesDir = join(storeDir, 'names');
    this.registryDir = join(storeDir, 'registry');
    this.deployedDir = join(storeDir, 'deployed');
    this.goneDir = join(storeDir, 'gone');
    for (const d of [this.namesDir, this.registryDir, this.deployedDir, this.goneDir])
      mkdirSync(d, { recursive: true, mode: 0o700 });
  }

  private file(workspace: string): string {
    // A workspace name is a DNS label (it becomes a file name here); anything else is a caller's bug.
    if (!WORKSPACE.test(workspace)) throw new Error(`not a workspace name: ${JSON.stringify(workspace)}`);
    return join(this.namesDir, `${workspace}.json`);
  }

  of(workspace: string): NameTable {
    const f = this.file(workspace);
    if (!existsSync(f)) return new Map();
    return new Map(Object.entries(JSON.parse(readFileSync(f, 'utf8')) as Record<string, string>));
  }

  /** Writes the workspace's names; what it let go of (a name dropped, or bound to another image) is remembered. */
  set(workspace: string, names: NameTable): void {
    const f = this.file(workspace);
    const before = this.of(workspace);
    const gone = this.gone(workspace);
    const size = gone.size;
    const now = new Date().toISOString();
    let changed = false;
    for (const [k, id] of before)
      if (names.get(k) !== id) {
        gone.set(goneKey(k, id), now);
        changed = true;
      }
    // Bound again (pushed again after a delete): no longer gone.
    for (const [k, id] of names) changed = gone.delete(goneKey(k, id)) || changed;
    if (names.size === 0) rmSync(f, { force: true });
    else writeAtomic(f, JSON.stringify(Object.fromEntries([...names].sort())));
    if (changed || gone.size !== size) this.setGone(workspace, gone);
  }

  /** The names `workspace` let go of (`goneKey` → when), those older than GONE_KEPT_MS forgotten. */
  gone(workspace: string): Map<string, string> {
    const f = this.goneFile(workspace);
    if (!existsSync(f)) return new Map();
    const oldest = new Date(Date.now() - GONE_KEPT_MS).toISOString();
    return new Map(
      Object.entries(JSON.parse(readFileSync(f, 'utf8')) as Record<string, string>).filter(
        ([, at]) => at >= oldest,
      ),
    );
  }

  setGone(workspace: string, gone: Map<string, string>): void {
    const f = this.goneFile(workspace);
    if (gone.size === 0) rmSync(f, { force: true });
    else writeAtomic(f, JSON.stringify(Object.fromEntries([...gone].sort())));
  }

  /** Workspaces that let go of a name (within GONE_KEPT_MS). */
  goneWorkspaces(): string[] {
    return readdirSync(this.goneDir)
      .filter((n) => n.endsWith('.json'))
      .map((n) => n.slice(0, -'.json'.length));
  }

  private goneFile(workspace: string): string {
    this.file(workspace); // judges the name
    return join(this.goneDir, `${workspace}.json`);
  }

  /** Workspaces holding at least one name. */
  workspaces(): string[] {
    return readdirSync(this.namesDir)
      .filter((n) => n.endsWith('.json'))
      .map((n) => n.slice(0, -'.json'.length));
  }

  /** Every image id some workspace holds by a name. */
  heldIds(): Set<string> {
    return new Set(this.workspaces().flatMap((w) => [...this.of(w).values()]));
  }

  drop(workspace: string): void {
    rmSync(this.file(workspace), { force: true });
    rmSync(this.deployedFile(workspace), { force: true });
    rmSync(this.goneFile(workspace), { force: true });
  }

  private deployedFile(workspace: string): string {
    this.file(workspace); // judges the name
    return join(this.deployedDir, `${workspace}.json`);
  }

  /** When each image (id hex) last started a sandbox or a build of the workspace. */
  deployed(workspace: string): Map<string, string> {
    const f = this.deployedFile(workspace);
    if (!existsSync(f)) return new Map();
    return new Map(Object.entries(JSON.parse(readFileSync(f, 'utf8')) as Record<string, string>));
  }

  setDeployed(workspace: string, table: Map<string, string>): void {
    writeAtomic(this.deployedFile(workspace), JSON.stringify(Object.fromEntries(table)));
  }

  /** The image a pull of `canonical` from its registry got last, if any. */
  registry(canonical: string): string | undefined {
    const f = join(this.registryDir, `${keyOf(canonical)}.json`);
    if (!existsSync(f)) return undefined;
    const r = JSON.parse(readFileSync(f, 'utf8'));
    return r.reference === canonical ? r.id : undefined;
  }

  setRegistry(canonical: string, id: string, digest: string): void {
    writeAtomic(
      join(this.registryDir, `${keyOf(canonical)}.json`),
      JSON.stringify({ reference: canonical, id, digest }),
    );
  }

  /** Forgets registry bindings to images that are gone. */
  dropRegistryUnless(exists: (id: string) => boolean): void {
    for (const n of readdirSync(this.registryDir)) {
      if (!n.endsWith('.json')) continue;
      const r = JSON.parse(readFileSync(join(this.registryDir, n), 'utf8'));
      if (!exists(r.id)) rmSync(join(this.registryDir, n), { force: true });
    }
  }

  /**
   * The layout before names were per workspace: `refs/<hash>.json` {reference, id, workspaces}, one global table
   * that an import could repoint under every workspace listed. It cannot tell a pull from an import, so each listed
   * workspace keeps the name (as it resolved then) and no registry binding is made: the next use of the name by a
   * workspace that does not hold it pulls again.
   */
  migrate(refsDir: string, exists: (id: string) => boolean): void {
    if (!existsSync(refsDir)) return;
    const tables = new Map<string, NameTable>();
    for (const n of readdirSync(refsDir)) {
      if (!n.endsWith('.json')) continue;
      let r: { reference?: unknown; id?: unknown; workspaces?: unknown };
      try {
        r = JSON.parse(readFileSync(join(refsDir, n), 'utf8'));
      } catch {
        continue; // half-written by a killed server: nothing to keep
      }
      if (typeof r.reference !== 'string' || typeof r.id !== 'string' || !exists(r.id)) continue;
      for (const w of Array.isArray(r.workspaces) ? r.workspaces : []) {
        if (typeof w !== 'string' || !WORKSPACE.test(w)) continue;
        const t = tables.get(w) ?? this.of(w);
        t.set(r.reference, r.id);
        tables.set(w, t);
      }
    }
    for (const [w, t] of tables) this.set(w, t);
    rmSync(refsDir, { recursive: true, force: true });
  }
}

export function writeAtomic(file: string, text: string): void {
  const tmp = `${file}.${randomBytes(4).toString('hex')}`;
  writeFileSync(tmp, text, { mode: 0o600 });
  renameSync(tmp, file);
}
