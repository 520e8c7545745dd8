// Snapshot layers on disk (decision 053): `<dataDir>/snapshots/workspaces/<ws>/layers/<id>`, one directory per layer
// holding one subdirectory per overlay of a sandbox's root (root, usr…), in overlayfs' format. A snapshot is a stack
// of layers (its own on top of those the sandbox was restored or forked from), and a restore, a fork or an unarchive
// runs a sandbox with that stack as the lowers of its root: N forks share the layers, none is copied. A layer is
// written under tmp/ and renamed into layers/ once whole, so a crash mid-capture leaves only tmp/ debris (swept at
// start) and never a layer a record could name half-written. Per workspace: every path names it (decision 043).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { NAME_PATTERN } from '../kinds/common.js';
import type { RuntimeDriver } from './driver.js';
import { squashLayers } from './linux/squash.js';

const WORKSPACE_NAME = new RegExp(NAME_PATTERN);
const LAYER_ID = /^l-[0-9a-f]{20}$/;

/** Layers a stack may have by default: each is a lower of the root overlay (the mount helper takes 400). */
export const MAX_SNAPSHOT_DEPTH = 128;

export interface CapturedLayer {
  /** Undefined when the sandbox had written nothing over its stack: no layer is added. */
  layer?: string;
  /** The stack the sandbox now shows, topmost first: the new layer over `below`, or the new layer alone (squashed). */
  stack: string[];
  /** Bytes the capture wrote (a squash links what the layers below hold: none of their bytes is written again). */
  bytes: number;
  pausedMs: number;
}

export class SnapshotLayers {
  /** Layers captured that no record names yet (settle() ends that): collect() leaves them. */
  private readonly inFlight = new Set<string>();

  constructor(
    private readonly dataDir: string,
    /** Past this many layers, a capture squashes the stack into one layer (BERTH_SNAPSHOT_MAX_LAYERS). */
    readonly maxLayers = MAX_SNAPSHOT_DEPTH,
  ) {}

  private root(): string {
    return join(this.dataDir, 'snapshots', 'workspaces');
  }

  private dir(workspace: string): string {
    if (!WORKSPACE_NAME.test(workspace))
      throw new Error(`not a workspace name: ${JSON.stringify(workspace)}`);
    return join(this.root(), workspace);
  }

  /** Host path of a layer of the workspace; throws on an id that is not a layer's. */
  path(workspace: string, layer: string): string {
    if (!LAYER_ID.test(layer)) throw new Error(`not a snapshot layer: ${JSON.stringify(layer)}`);
    return join(this.dir(workspace), 'layers', layer);
  }

  /** The host paths of a stack of layers, topmost first; throws when one is missing (never a silent gap). */
  paths(workspace: string, layers: string[]): string[] {
    return layers.map((l) => {
      const p = this.path(workspace, l);
      if (!existsSync(p)) throw new Error(`snapshot layer ${l} is missing from the data dir`);
      return p;
    });
  }

  /**
   * Captures what the runtime sandbox `id` wrote over its stack `below` (topmost first) as a new layer of
   * `workspace`. When the stack would pass `maxLayers`, the new layer is the whole stack squashed into one (the
   * layers below are left to collect() once nothing stands on them): restore→snapshot cycles go on for ever.
   */
  async capture(
    driver: RuntimeDriver,
    id: string,
    workspace: string,
    below: string[],
  ): Promise<CapturedLayer> {
    const layer = `l-${randomBytes(10).toString('hex')}`;
    const tmp = join(this.dir(workspace), 'tmp', layer);
    const top = `${tmp}.top`;
    mkdirSync(top, { recursive: true, mode: 0o700 });
    try {
      const { pausedMs } = await driver.captureChanges(id, top);
      if (isEmptyLayer(top)) {
        rmSync(top, { recursive: true, force: true });
        return { stack: below, bytes: 0, pausedMs };
      }
      const bytes = await diskBytes(top);
      const squash = below.length + 1 > this.maxLayers;
      if (squash) {
        mkdirSync(tmp, { mode: 0o700 });
        await squashLayers([top, ...this.paths(workspace, below)], tmp);
        rmSync(top, { recursive: true, force: true });
      } else renameSync(top, tmp);
      mkdirSync(join(this.dir(workspace), 'layers'), { recursive: true, mode: 0o700 });
      this.inFlight.add(layer);
      renameSync(tmp, this.path(workspace, layer));
      return { layer, stack: squash ? [layer] : [layer, ...below], bytes, pausedMs };
    } catch (e) {
      rmSync(top, { recursive: true, force: true });
      rmSync(tmp, { recursive: true, force: true });
      throw e;
    }
  }

  /** The caller has recorded the layer (or given up on it): collect() may judge it from now on. */
  settle(layer: string | undefined): void {
    if (layer) this.inFlight.delete(layer);
  }

  /** Bytes on disk of the workspace's layers (what its snapshot quota counts). */
  async usage(workspace: string): Promise<number> {
    const d = join(this.dir(workspace), 'layers');
    return existsSync(d) ? diskBytes(d) : 0;
  }

  /** Deletes the workspace's layers that `keep` does not name (no snapshot and no sandbox stands on them). */
  collect(workspace: string, keep: Set<string>): string[] {
    const d = join(this.dir(workspace), 'layers');
    const gone: string[] = [];
    for (const l of existsSync(d) ? readdirSync(d) : [])
      if (!keep.has(l) && !this.inFlight.has(l)) {
        rmSync(join(d, l), { recursive: true, force: true });
        gone.push(l);
      }
    return gone;
  }

  /** Removes what captures a killed server left half-written (tmp/ of every workspace). */
  sweep(): void {
    const r = this.root();
    for (const ws of existsSync(r) ? readdirSync(r) : [])
      rmSync(join(r, ws, 'tmp'), { recursive: true, force: true });
  }

  /** Deletes every layer of a deleted workspace. */
  removeWorkspace(workspace: string): void {
    rmSync(this.dir(workspace), { recursive: true, force: true });
  }
}

/** True when no overlay of the layer holds anything. */
function isEmptyLayer(dir: string): boolean {
  return readdirSync(dir).every((o) => readdirSync(join(dir, o)).length === 0);
}

/** Bytes the tree takes on disk (`du`: blocks, hard links once). */
function diskBytes(dir: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const p = spawn('du', ['-s', '-B1', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
    });
    p.on('error', reject);
    p.on('close', (code) => {
      const n = Number.parseInt(out, 10);
      if (code === 0 && Number.isFinite(n)) resolve(n);
      else reject(new Error(`du ${dir} failed`));
    });
  });
}
