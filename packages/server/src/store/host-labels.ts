// The table of host labels: which object the first DNS label of an inference address (`sbx-…`, `pv-…`) names.
// A row is claimed in the same transaction as its object's create and released with the object's record, and the
// gateway routes by exact lookup, never by splitting a label at `-` to guess an owner
// (docs/decisions/016-addresses-and-tenancy.md). Nothing here names a kind: any kind may hold labels.
import { ApiError } from '../errors.js';
import { keyOf, type ResourceKey, type Store, type WriteOp, EVERY_WORKSPACE } from './store.js';

/** The record kind of the table; its rows live in the global pseudo-workspace, one per label. */
export const HOST_LABEL_KIND = 'HostLabel';
/** Not a DNS label, so no workspace can be called that (the same pseudo-workspace the identity indexes use). */
const GLOBAL = '_';

export interface HostLabelRecord {
  owner: ResourceKey;
}

export const hostLabelKey = (label: string): ResourceKey => ({
  kind: HOST_LABEL_KIND,
  workspace: GLOBAL,
  parent: '',
  name: label,
});

const sameKey = (a: ResourceKey, b: ResourceKey) =>
  a.kind === b.kind && a.workspace === b.workspace && a.parent === b.parent && a.name === b.name;

const describe = (k: ResourceKey) => `${k.kind} ${JSON.stringify(k.name)}`;

/**
 * Ops claiming `labels` for `owner`, to be written in the same transaction as the owner's create. A label held
 * by a live object is refused (409); the owner is named only when it is in the claimant's own workspace, so the
 * answer tells nobody what another tenant holds. A row whose owner's record is gone (or one left by an earlier
 * object of the same key) is taken over at the version read: a concurrent claim then fails the whole write.
 */
export async function claimLabelOps(store: Store, labels: string[], owner: ResourceKey): Promise<WriteOp[]> {
  const ops: WriteOp[] = [];
  const body = { owner: keyOf(owner) } satisfies HostLabelRecord;
  for (const label of labels) {
    const key = hostLabelKey(label);
    const cur = await store.get(key);
    if (!cur) {
      ops.push({ op: 'create', key, body });
      continue;
    }
    const held = (cur.body as HostLabelRecord).owner;
    if (!sameKey(held, owner) && (await store.get(held))) {
      // A label starting with `/` is a path under a workspace (`/<ws>/<path>`), the rest host labels.
      const what = label.startsWith('/')
        ? `the path ${label.slice(label.indexOf('/', 1) + 1)}`
        : `the address label ${label}`;
      const fix = label.startsWith('/') ? 'choose another path' : 'choose another name';
      throw new ApiError(
        'CONFLICT',
        held.workspace === owner.workspace
          ? `${what} is already used by ${describe(held)} of this workspace; ${fix}`
          : `${what} is already used by an object of another workspace; ${fix}`,
      );
    }
    ops.push({ op: 'update', key, body, expectVersion: cur.resourceVersion });
  }
  return ops;
}

/** Whether `owner` holds `label` in the table now. */
export async function holdsLabel(store: Store, label: string, owner: ResourceKey): Promise<boolean> {
  const cur = await store.get(hostLabelKey(label));
  return !!cur && sameKey((cur.body as HostLabelRecord).owner, owner);
}

/** Ops releasing the rows of `labels` that `owner` holds, to be written with the owner record's final delete. */
export async function releaseLabelOps(
  store: Store,
  labels: string[],
  owner: ResourceKey,
): Promise<WriteOp[]> {
  const ops: WriteOp[] = [];
  for (const label of labels) {
    const cur = await store.get(hostLabelKey(label));
    if (cur && sameKey((cur.body as HostLabelRecord).owner, owner))
      ops.push({ op: 'delete', key: keyOf(cur), expectVersion: cur.resourceVersion });
  }
  return ops;
}

/** True when a failed write lost a race for a label row (judge the create again: it then answers 409). */
export const isLabelRace = (e: unknown) =>
  e instanceof Error && 'key' in e && (e as { key: ResourceKey }).key?.kind === HOST_LABEL_KIND;

/**
 * Label → owner, in memory and kept current by the store's watch, so routing a Host costs no store read. The
 * owner may since be gone (a row is released with its record): callers look the object up as usual.
 */
export class HostLabelIndex {
  private readonly owners = new Map<string, ResourceKey>();
  private unwatch?: () => void;

  constructor(private readonly store: Store) {}

  async start(): Promise<void> {
    this.unwatch = this.store.watch((c) => {
      if (c.object.kind !== HOST_LABEL_KIND) return;
      if (c.type === 'DELETED') this.owners.delete(c.object.name);
      else this.owners.set(c.object.name, (c.object.body as HostLabelRecord).owner);
    });
    for (const o of await this.store.list({ kind: HOST_LABEL_KIND, workspace: GLOBAL }))
      this.owners.set(o.name, (o.body as HostLabelRecord).owner);
  }

  /** The object a label names, if any holds it. */
  resolve(label: string): ResourceKey | undefined {
    return this.owners.get(label);
  }

  close(): void {
    this.unwatch?.();
  }
}

/**
 * Claims the labels of objects stored before the table existed (first come, by name order). A label two such
 * objects would share goes to the first; the other is logged and keeps only its path address.
 */
export async function backfillLabels(
  store: Store,
  kinds: string[],
  labelsOf: (o: ResourceKey, body?: any) => string[],
  warn: (obj: object, msg: string) => void,
): Promise<void> {
  for (const kind of kinds)
    for (const o of await store.list({ workspace: EVERY_WORKSPACE, kind })) {
      const labels = labelsOf(o, o.body);
      const missing = [];
      for (const l of labels) if (!(await store.get(hostLabelKey(l)))) missing.push(l);
      if (!missing.length) continue;
      try {
        await store.write(await claimLabelOps(store, missing, o));
      } catch (err) {
        warn({ err, object: keyOf(o) }, 'an address label is held by another object; not claimed');
      }
    }
}
