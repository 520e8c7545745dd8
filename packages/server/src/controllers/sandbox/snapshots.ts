// Snapshots of sandboxes (decision 053): a record of the workspace (id, name unique per source, the source's spec)
// naming a stack of snapshot layers (runtime/snapshot-layers.ts). A capture freezes the sandbox for the copy of what
// it wrote (its open connections wait, none drops), a restore starts its instance again on the stack under the same
// name, a fork creates a new sandbox on it, an archive captures and stops. Files only: memory, processes and volumes
// are not captured, and the record's spec says so.
import { randomBytes } from 'node:crypto';
import { ApiError, invalid, notFound } from '../../errors.js';
import { NAME_PATTERN } from '../../kinds/common.js';
import { SNAPSHOT_KIND } from '../../kinds/sandbox.js';
import { isGone } from '../../kinds/status.js';
import type { Instances } from '../../runtime/instances.js';
import { sandboxId } from '../../runtime/sandbox-id.js';
import type { CapturedLayer, SnapshotLayers } from '../../runtime/snapshot-layers.js';
import type { Resources } from '../../store/resources.js';
import { keyOf, type ResourceKey, StoreError, type StoredObject } from '../../store/store.js';

/** Bytes of snapshot layers a workspace may hold by default (BERTH_QUOTA_SNAPSHOT_MB). */
export const DEFAULT_SNAPSHOT_QUOTA_BYTES = 20 * 1024 ** 3;

/** What a snapshot holds, in its own spec: the kernel here cannot checkpoint memory (RUNTIME-FACTS.md). */
export const SNAPSHOT_HOLDS = {
  files: true,
  memory: false,
  processes: false,
  volumes: false,
} as const;
const HOLDS_NOTE =
  "files of the sandbox's root (everything it wrote over its image); not its memory, its running processes or its volumes: a restore or a fork starts processes fresh";

const NAME = new RegExp(NAME_PATTERN);

export interface SnapshotRecord {
  id: string;
  name: string;
  workspace: string;
  createdAt: string;
  createdBy?: string;
  status: 'ready';
  source: { kind: 'sandbox'; name: string };
  /** Layer ids, topmost first. */
  layers: string[];
  /** Bytes of its own top layer (0 when the sandbox had written nothing over its stack). */
  bytes: number;
  /** How long the source was frozen for the capture. */
  pausedMs: number;
  /** The source's spec as stored (secrets sealed): what a fork runs with. */
  sourceSpec: any;
}

export interface SnapshotsDeps {
  resources: Resources;
  instances: Instances;
  layers: SnapshotLayers;
  quotaBytes?: number;
  now?: () => Date;
}

export class Snapshots {
  private readonly locks = new Map<string, Promise<unknown>>();
  readonly quotaBytes: number;
  private readonly now: () => Date;

  constructor(private readonly deps: SnapshotsDeps) {
    this.quotaBytes = deps.quotaBytes ?? DEFAULT_SNAPSHOT_QUOTA_BYTES;
    this.now = deps.now ?? (() => new Date());
  }

  get layers(): SnapshotLayers {
    return this.deps.layers;
  }

  private key(workspace: string, id: string): ResourceKey {
    return { kind: SNAPSHOT_KIND, workspace, parent: '', name: id };
  }

  private serial<T>(k: string, fn: () => Promise<T>): Promise<T> {
    const next = (this.locks.get(k) ?? Promise.resolve()).then(fn, fn);
    const tail = next.catch(() => undefined);
    this.locks.set(k, tail);
    void tail.then(() => {
      if (this.locks.get(k) === tail) this.locks.delete(k);
    });
    return next;
  }

  async list(workspace: string, source?: string): Promise<SnapshotRecord[]> {
    const all = (await this.deps.resources.store.list({ kind: SNAPSHOT_KIND, workspace })).map(
      (o) => o.body as SnapshotRecord,
    );
    return source === undefined ? all : all.filter((r) => r.source.name === source);
  }

  /** By id, or by a name only one snapshot of the workspace has; 404 otherwise. */
  async get(workspace: string, idOrName: string): Promise<SnapshotRecord> {
    const o = await this.deps.resources.store.get(this.key(workspace, idOrName));
    if (o) return o.body as SnapshotRecord;
    const named = (await this.list(workspace)).filter((r) => r.name === idOrName);
    if (named.length === 1) return named[0];
    if (named.length > 1)
      throw new ApiError(
        'CONFLICT',
        `${named.length} snapshots are named ${JSON.stringify(idOrName)} (names are unique per source): use the id`,
      );
    throw notFound(`snapshot ${JSON.stringify(idOrName)}`);
  }

  /** A snapshot of the sandbox `source` by id or name; 404 when it is not one of the sandbox's. */
  async getOf(workspace: string, source: string, idOrName: string): Promise<SnapshotRecord> {
    const mine = (await this.list(workspace, source)).find((r) => r.id === idOrName || r.name === idOrName);
    if (!mine) throw notFound(`snapshot ${JSON.stringify(idOrName)} of sandbox ${JSON.stringify(source)}`);
    return mine;
  }

  /** Whether each source of these snapshots still exists (for `source.deleted`). */
  async sourcesGone(workspace: string): Promise<Set<string>> {
    const live = new Set(
      (await this.deps.resources.store.list({ kind: 'Sandbox', workspace }))
        .filter((o) => !isGone(o))
        .map((o) => o.name),
    );
    const gone = new Set<string>();
    for (const r of await this.list(workspace)) if (!live.has(r.source.name)) gone.add(r.source.name);
    return gone;
  }

  private async sandbox(workspace: string, name: string): Promise<StoredObject> {
    const o = await this.deps.resources.store.get({ kind: 'Sandbox', workspace, parent: '', name });
    if (!o || isGone(o)) throw notFound(`Sandbox ${JSON.stringify(name)}`);
    return o;
  }

  /** Bytes of snapshot layers the workspace holds, against its quota. */
  async usage(workspace: string): Promise<{ usedBytes: number; limitBytes: number }> {
    return { usedBytes: await this.deps.layers.usage(workspace), limitBytes: this.quotaBytes };
  }

  private quotaError(workspace: string, used: number): ApiError {
    const mb = (b: number) => `${Math.ceil(b / 1024 ** 2)} MB`;
    return new ApiError(
      'QUOTA_EXCEEDED',
      `workspace ${workspace}'s snapshot quota is ${mb(this.quotaBytes)} (BERTH_QUOTA_SNAPSHOT_MB), ${mb(used)} would be used: delete snapshots first`,
      { code: 'SNAPSHOT_QUOTA_EXCEEDED' },
    );
  }

  /**
   * Captures a snapshot of the sandbox `source`: a new layer of what it wrote over its stack, on top of that stack.
   * An archived sandbox's snapshot is its archived stack (nothing runs to capture).
   */
  create(
    workspace: string,
    source: string,
    name: string | undefined,
    actor?: string,
  ): Promise<SnapshotRecord> {
    if (name !== undefined && (typeof name !== 'string' || !NAME.test(name)))
      throw invalid([
        { pointer: '/name', message: 'must be a name: lowercase letters, digits and -, at most 63' },
      ]);
    return this.serial(`${workspace}/${source}`, async () => {
      const o = await this.sandbox(workspace, source);
      const taken = (await this.list(workspace, source)).some((r) => r.name === name);
      if (name !== undefined && taken)
        throw new ApiError(
          'ALREADY_EXISTS',
          `sandbox ${JSON.stringify(source)} already has a snapshot named ${JSON.stringify(name)}`,
          { code: 'SNAPSHOT_ALREADY_EXISTS' },
        );
      const below: string[] = o.body.rootLayers ?? [];
      const before = await this.deps.layers.usage(workspace);
      if (before >= this.quotaBytes) throw this.quotaError(workspace, before);
      let top: CapturedLayer = { stack: below, bytes: 0, pausedMs: 0 };
      if (o.body.status !== 'ARCHIVED') {
        const info = await this.deps.instances.driver.inspect(sandboxId(workspace, source));
        if (!info || info.state === 'dead')
          throw new ApiError(
            'INVALID_STATE',
            `sandbox ${JSON.stringify(source)} is not running (${o.body.status}): nothing to capture`,
          );
        top = await this.deps.layers.capture(this.deps.instances.driver, info.id, workspace, below);
      }
      try {
        if (before + top.bytes > this.quotaBytes) throw this.quotaError(workspace, before + top.bytes);
        const record: SnapshotRecord = {
          id: `snap-${randomBytes(8).toString('hex')}`,
          name: name ?? `${source.slice(0, 40)}-${randomBytes(4).toString('hex')}`,
          workspace,
          createdAt: this.now().toISOString(),
          ...(actor ? { createdBy: actor } : {}),
          status: 'ready',
          source: { kind: 'sandbox', name: source },
          layers: top.stack,
          bytes: top.bytes,
          pausedMs: Math.round(top.pausedMs * 10) / 10,
          sourceSpec: o.body.spec,
        };
        await this.deps.resources.store.write([
          { op: 'create', key: this.key(workspace, record.id), body: record as any },
        ]);
        return record;
      } catch (e) {
        this.deps.layers.settle(top.layer);
        await this.collect(workspace);
        throw e;
      } finally {
        this.deps.layers.settle(top.layer);
      }
    });
  }

  /** Deletes a snapshot and the layers nothing else stands on. */
  async delete(workspace: string, id: string): Promise<SnapshotRecord> {
    const rec = await this.get(workspace, id);
    try {
      await this.deps.resources.store.write([{ op: 'delete', key: this.key(workspace, rec.id) }]);
    } catch (e) {
      if (!(e instanceof StoreError && e.reason === 'not_found')) throw e;
    }
    await this.collect(workspace);
    return rec;
  }

  /** Layers a snapshot record or a sandbox stands on. */
  private async keep(workspace: string): Promise<Set<string>> {
    const keep = new Set<string>();
    for (const r of await this.list(workspace)) for (const l of r.layers) keep.add(l);
    // A TERMINATED sandbox's instance is gone: its layers are kept only by what else stands on them.
    for (const o of await this.deps.resources.store.list({ kind: 'Sandbox', workspace }))
      if (o.body.status !== 'TERMINATED') for (const l of o.body.rootLayers ?? []) keep.add(l);
    return keep;
  }

  /** Frees the workspace's layers that nothing stands on any more. */
  collect(workspace: string): Promise<string[]> {
    return this.serial(`collect/${workspace}`, async () =>
      this.deps.layers.collect(workspace, await this.keep(workspace)),
    );
  }

  /**
   * Restores the sandbox to one of its own snapshots: its instance goes, and starts again on the snapshot's stack
   * under the same name (URLs and previews are the object's, so they stay); processes start fresh. Answers once
   * asked, without waiting for the start.
   */
  restore(workspace: string, name: string, idOrName: string): Promise<SnapshotRecord> {
    return this.serial(`${workspace}/${name}`, async () => {
      const o = await this.sandbox(workspace, name);
      const rec = await this.getOf(workspace, name, idOrName);
      if (['ARCHIVED', 'ARCHIVING', 'UNARCHIVING'].includes(o.body.status))
        throw new ApiError(
          'INVALID_STATE',
          `sandbox ${JSON.stringify(name)} is ${o.body.status}: unarchive it first`,
        );
      if (o.body.spec?.enabled === false)
        throw new ApiError(
          'INVALID_STATE',
          `sandbox ${JSON.stringify(name)} is deactivated: enable it first`,
        );
      // The instance goes first: the reconcile the write below queues then starts it on the snapshot's stack, even
      // when that stack is the one it already stands on (a second restore of the same snapshot).
      await this.deps.instances.remove(sandboxId(workspace, name));
      const d = await this.deps.resources.updateStatus(keyOf(o), {
        to: 'DEPLOYING',
        message: `restoring snapshot ${rec.id} (${rec.name}): processes start fresh`,
        extras: { rootLayers: rec.layers, restoredFrom: rec.id, state: undefined },
        when: (cur) => !isGone(cur),
      });
      if (!d) throw notFound(`Sandbox ${JSON.stringify(name)}`);
      await this.collect(workspace);
      return rec;
    });
  }
}

/** The wire shape of a snapshot (the service's SandboxSnapshot), with what it holds said in its spec. */
export function snapshotView(r: SnapshotRecord, sourceDeleted: boolean) {
  const s = r.sourceSpec ?? {};
  return {
    id: r.id,
    name: r.name,
    status: r.status,
    workspace: r.workspace,
    createdAt: r.createdAt,
    ...(r.createdBy ? { createdBy: r.createdBy } : {}),
    sandboxName: r.source.name,
    source: { kind: r.source.kind, name: r.source.name, deleted: sourceDeleted },
    spec: {
      ...(s.runtime?.image ? { image: s.runtime.image } : {}),
      ...(s.runtime?.memory ? { memory: s.runtime.memory } : {}),
      ...(s.runtime?.ports ? { ports: s.runtime.ports } : {}),
      ...(s.region ? { region: s.region } : {}),
      holds: SNAPSHOT_HOLDS,
      note: HOLDS_NOTE,
      sizeBytes: r.bytes,
      layers: r.layers.length,
      pausedMs: r.pausedMs,
    },
  };
}
