// The one ordered pipeline for envelope objects (Kubernetes' BeforeCreate/BeforeUpdate in one place):
// check body -> keep stored secrets for redacted echoes -> defaults -> kind rules -> immutables ->
// seal secrets -> timestamps, creator, initial status -> one transaction.
// Status and events are written through `updateStatus` and `recordEvent`, never through create/replace.
import { isoTime } from './iso-time.js';
import { ApiError, type FieldIssue, invalid, notFound } from '../errors.js';
import type { SecretBox } from '../crypto/secret-box.js';
import { unknownFieldIssues } from '../kinds/field-suggestions.js';
import { copyJson, copyShallow, sameJson } from '../kinds/json-values.js';
import { checkBody, schemasOf } from '../kinds/schema.js';
import {
  dropEmptied,
  movedDestinations,
  REDACTED,
  restoreOmitted,
  secretPointer,
  visitSecrets,
} from '../kinds/secret-paths.js';
import { isGone, type Status } from '../kinds/status.js';
import type { KindDescriptor, Role } from '../kinds/types.js';
import type { Outbound } from '../outbound/index.js';
import { claimLabelOps, holdsLabel, isLabelRace, releaseLabelOps } from './host-labels.js';
import { recordEvent, type StatusUpdate, updateStatus, updateStatuses, withEvent } from './status-writes.js';
import { keyOf, type ResourceKey, type Store, StoreError, type StoredObject, type WriteOp } from './store.js';

/**
 * A replace that loses a race with another client's write is judged again this many times: the one retry
 * outside the controllers' queue (decision 004). Validation is asynchronous (it reads other objects), so it
 * cannot run inside the store's transaction; only a client's create of the same name, or a client's write
 * under a redacted secret echo, leads here. Status writes never do.
 */
const REPLACE_RETRIES = 3;

export interface WriteContext {
  workspace: string;
  /** Parent names in path order, e.g. [vpcName, gatewayName]. */
  parents: string[];
  actor: string;
  /** The writer's role in the workspace; absent counts as below admin. */
  role?: Role;
  /** `?fieldValidation=Strict` rejects unknown fields instead of dropping them. */
  strict?: boolean;
  /**
   * Read-only fields (the kind's `readOnly`) a create sets from the start, written with the object in one write: a
   * sandbox forked from a snapshot is created standing on its layers (decision 053).
   */
  serverFields?: Record<string, unknown>;
}

export interface WriteResult {
  object: StoredObject;
  created: boolean;
  /** Pointers of unknown fields dropped from the body (for the Warning header). */
  dropped: string[];
}

export interface ResourcesOptions {
  regions: string[];
  now?: () => Date;
  /** Fills `metadata.url` (e.g. the sandbox address) from the stored body. */
  urlOf?: (kd: KindDescriptor, workspace: string, body: any) => string | undefined;
  /**
   * The labels an object holds in the address table (store/host-labels.ts); none when absent. `body` is the stored
   * or about-to-be-stored object: labels that follow the spec (a trigger's path) move with each replace.
   */
  labelsOf?: (key: ResourceKey, body?: any) => string[];
  /** Egress gateway name → host-local addresses egress IPs are allocated from (BERTH_EGRESS_GATEWAYS). */
  egressGateways?: Record<string, string[]>;
  /** Judges the URLs a spec makes Berth send requests to (a kind's outboundTargets) before they are stored. */
  outbound?: Pick<Outbound, 'urlIssue'>;
  /**
   * Admission (the workspace's quotas, controllers/core/quota-admission.ts): asked about each create and replace once the
   * body is prepared, with the stored object a replace changes. Throws a wire error to refuse at once; returns ops
   * (checks) written in the same transaction as the object, which decide a race.
   */
  admit?: (kd: KindDescriptor, key: ResourceKey, body: any, prev?: StoredObject) => WriteOp[];
  /**
   * Read-only fields the server sets on every new object of a kind, from the body as it is to be stored: a cluster
   * records the node a new sandbox is placed on (cluster/placement.ts). Undefined for kinds it does not place.
   */
  placeOf?: (kd: KindDescriptor, body: any, workspace: string) => Record<string, unknown> | undefined;
  /** In a cluster, every region a node serves (ValidationContext.nodeRegions). */
  nodeRegions?: () => ReadonlySet<string> | undefined;
}

export class Resources {
  private readonly now: () => Date;
  constructor(
    readonly store: Store,
    readonly kinds: KindDescriptor[],
    private readonly box: SecretBox,
    private readonly opts: ResourcesOptions,
  ) {
    this.now = opts.now ?? (() => new Date());
  }

  /** The same resources over another store: a cluster node's fenced writes as a holder (cluster/fencing.ts). */
  withStore(store: Store): Resources {
    return new Resources(store, this.kinds, this.box, this.opts);
  }

  /** Regions a spec may name (controllers re-check stored specs against them). */
  get regions(): string[] {
    return this.opts.regions;
  }

  /** Egress gateway name → the host addresses its egress IPs are allocated from (none: no pool). */
  get egressGateways(): Record<string, string[]> {
    return this.opts.egressGateways ?? {};
  }

  kind(name: string): KindDescriptor {
    const kd = this.kinds.find((k) => k.kind === name);
    if (!kd) throw new Error(`unknown kind ${name}`);
    return kd;
  }

  key(kd: KindDescriptor, workspace: string, parents: string[], name: string): ResourceKey {
    return { kind: kd.kind, workspace, parent: parents.join('/'), name };
  }

  async get(kd: KindDescriptor, workspace: string, parents: string[], name: string) {
    return this.store.get(this.key(kd, workspace, parents, name));
  }

  async mustGet(kd: KindDescriptor, workspace: string, parents: string[], name: string) {
    const o = await this.get(kd, workspace, parents, name);
    if (!o) throw notFound(`${kd.kind} ${JSON.stringify(name)}`);
    return o;
  }

  /** 404 unless every parent in the path exists (e.g. the VPC of an egress gateway). */
  async checkParents(kd: KindDescriptor, workspace: string, parents: string[]) {
    for (let i = 0; i < (kd.parents ?? []).length; i++) {
      const ref = kd.parents![i];
      const pk = this.kind(ref.kind);
      const o = await this.store.get(this.key(pk, workspace, parents.slice(0, i), parents[i]));
      if (!o) throw notFound(`${ref.kind} ${JSON.stringify(parents[i])}`);
    }
  }

  async create(kd: KindDescriptor, ctx: WriteContext, raw: unknown, attempt = 0): Promise<WriteResult> {
    await this.checkParents(kd, ctx.workspace, ctx.parents);
    const r = raw as any;
    if (kd.generateName && r && typeof r === 'object' && !Array.isArray(r)) {
      if (r.metadata === undefined) r.metadata = {};
      if (r.metadata && typeof r.metadata === 'object' && r.metadata.name === undefined)
        r.metadata.name = kd.generateName();
    }
    const { body, dropped } = await this.prepare(kd, ctx, raw, undefined);
    const key = this.key(kd, ctx.workspace, ctx.parents, body.metadata.name);
    const admitted = this.opts.admit?.(kd, key, body) ?? [];
    try {
      const [object] = await this.store.write([
        {
          op: 'create',
          key,
          body: this.newBody(kd, ctx, body),
        },
        ...(await claimLabelOps(this.store, this.labelsOf(key, body), key)),
        ...admitted,
      ]);
      return { object, created: true, dropped };
    } catch (e) {
      // Another object took one of the labels meanwhile: judged again, the claim then answers 409.
      if (isLabelRace(e) && attempt < REPLACE_RETRIES) return this.create(kd, ctx, raw, attempt + 1);
      throw e;
    }
  }

  /** A new object's body as stored: the prepared body, the create's server fields, then its placement. */
  private newBody(kd: KindDescriptor, ctx: WriteContext, body: any): any {
    const out = { ...this.stamp(kd, ctx, body, undefined), ...(ctx.serverFields ?? {}) };
    const placed = this.opts.placeOf?.(kd, out, ctx.workspace);
    const fields = { ...ctx.serverFields, ...placed };
    for (const k of Object.keys(fields))
      if (!(k in (kd.readOnly ?? {}))) throw new Error(`${kd.kind} ${k} is not a field the server writes`);
    return { ...out, ...placed };
  }

  /** PUT: creates or replaces. The name in the path wins; a different `metadata.name` is a 422. */
  async replace(
    kd: KindDescriptor,
    ctx: WriteContext,
    name: string,
    raw: unknown,
    attempt = 0,
  ): Promise<WriteResult> {
    if (kd.parents?.length) await this.checkParents(kd, ctx.workspace, ctx.parents);
    const key = this.key(kd, ctx.workspace, ctx.parents, name);
    const prev = await this.store.get(key);
    if (raw && typeof raw === 'object' && !Array.isArray(raw)) {
      const meta = (raw as any).metadata;
      if (meta && typeof meta === 'object' && meta.name === undefined) meta.name = name;
      if (meta && typeof meta === 'object' && meta.name !== name)
        throw invalid([{ pointer: '/metadata/name', message: `must equal the name in the path (${name})` }]);
    }
    if (isGone(prev))
      throw new ApiError('INVALID_STATE', `${kd.kind} ${JSON.stringify(name)} is being deleted`);
    const { body, dropped, expectVersion, keptSecrets } = await this.prepare(kd, ctx, raw, prev);
    const admitted = this.opts.admit?.(kd, key, body, prev) ?? [];
    // The client-visible resourceVersion moves only with client writes, so a controller's status write between a
    // client's GET and PUT (the SDK's update pattern) is not a conflict.
    if (expectVersion !== undefined && prev && String(expectVersion) !== userVersion(prev))
      throw new StoreError('conflict', key);
    // The final body is made inside the store's transaction from the object as it is then, so concurrent status
    // writes and concurrent unconditional replaces (last writer wins) never turn into spurious conflicts.
    const mutate = (cur: StoredObject) => {
      if (prev && userVersion(cur) !== userVersion(prev)) {
        // Another client write landed after this request read the object: a conditional write or one that kept
        // stored secrets by echoing them redacted was judged against what is no longer there.
        if (expectVersion !== undefined || keptSecrets) throw new StoreError('conflict', key);
        const issues = immutableIssues(kd, body.spec, this.defaulted(kd, cur.body.spec));
        if (issues.length) throw invalid(issues);
        // The label ops below were computed from the object this request read: judged again if they moved.
        if (this.labelsOf(key, cur.body).join('\n') !== this.labelsOf(key, prev.body).join('\n'))
          throw new StoreError('conflict', key);
      }
      if (isGone(cur))
        throw new ApiError('INVALID_STATE', `${kd.kind} ${JSON.stringify(name)} is being deleted`);
      return this.stamp(kd, ctx, body, cur);
    };
    try {
      const ops: WriteOp[] = prev
        ? [{ op: 'update', key, mutate }, ...(await this.relabelOps(key, prev.body, body)), ...admitted]
        : [
            {
              op: 'create',
              key,
              body: this.newBody(kd, ctx, body),
            },
            ...(await claimLabelOps(this.store, this.labelsOf(key, body), key)),
            ...admitted,
          ];
      const [object] = await this.store.write(ops);
      return { object, created: !prev, dropped };
    } catch (e) {
      // Lost a race: created by someone else meanwhile, or changed under a redacted echo; judge it again.
      const raced =
        isLabelRace(e) ||
        (e instanceof StoreError &&
          (e.reason === 'exists' || (e.reason === 'conflict' && expectVersion === undefined)));
      if (raced && attempt < REPLACE_RETRIES) return this.replace(kd, ctx, name, raw, attempt + 1);
      throw e;
    }
  }

  /**
   * Marks an object DELETING (kinds with status; a controller finishes the job) or removes it at once.
   * Children of a `cascade` kind go with it; any other child blocks the delete. A DELETE has no precondition,
   * so every op here is unconditional and the DELETING mark is made from the object as it is at the write:
   * a status write racing the request cannot make it fail.
   */
  async delete(kd: KindDescriptor, ctx: WriteContext, name: string): Promise<StoredObject> {
    const prev = await this.mustGet(kd, ctx.workspace, ctx.parents, name);
    const ops = await this.dependentOps(kd, ctx.workspace, [...ctx.parents, name]);
    const key = keyOf(prev);
    if (!kd.hasStatus) {
      ops.push(...(await this.releaseOps(prev)));
      ops.push({ op: 'delete', key });
      const out = await this.store.write(ops);
      return out.at(-1)!;
    }
    if (isGone(prev)) {
      if (ops.length) await this.store.write(ops);
      return prev;
    }
    const message = `deletion requested by ${ctx.actor}`;
    const mutate = (cur: StoredObject) => {
      if (isGone(cur)) return cur.body;
      const refusal = kd.deleteRefusal?.(cur.body);
      if (refusal) throw new ApiError('CONFLICT', refusal);
      return withEvent(structuredClone(cur.body), 'DELETING', message, this.now());
    };
    ops.push({ op: 'update', key, mutate });
    const out = await this.store.write(ops);
    return out.at(-1)!;
  }

  /** Deletes of what goes with an object: records it owns and `cascade` children (recursively). */
  private async dependentOps(kd: KindDescriptor, workspace: string, path: string[]): Promise<WriteOp[]> {
    const ops: WriteOp[] = [];
    const parent = path.join('/');
    for (const rk of kd.ownedRecords ?? [])
      for (const r of await this.store.list({ kind: rk, workspace, parent }))
        ops.push({ op: 'delete', key: keyOf(r) });
    for (const ck of this.kinds.filter((k) => k.parents?.at(-1)?.kind === kd.kind)) {
      const children = await this.store.list({ kind: ck.kind, workspace, parent });
      if (!children.length) continue;
      if (!ck.cascade)
        throw new ApiError(
          'INVALID_STATE',
          `${kd.kind} ${JSON.stringify(path.at(-1))} still has ${ck.plural} (${children.map((c) => c.name).join(', ')}); delete them first`,
        );
      for (const c of children) {
        ops.push(...(await this.dependentOps(ck, workspace, [...path, c.name])));
        ops.push(...(await this.releaseOps(c)));
        ops.push({ op: 'delete', key: keyOf(c) });
      }
    }
    return ops;
  }

  /**
   * The final removal of a record (after TERMINATED): at the version read, with its address labels released in
   * the same transaction, so a label never outlives its object's record.
   */
  async removeRecord(o: StoredObject): Promise<void> {
    await this.store.write([
      ...(await this.releaseOps(o)),
      { op: 'delete', key: keyOf(o), expectVersion: o.resourceVersion },
    ]);
  }

  private labelsOf(key: ResourceKey, body: any): string[] {
    return this.opts.labelsOf?.(key, body) ?? [];
  }

  private releaseOps(o: StoredObject): Promise<WriteOp[]> {
    return releaseLabelOps(this.store, this.labelsOf(o, o.body), keyOf(o));
  }

  /**
   * A replace's label ops: claims of the labels the new body adds, or keeps but no longer holds (an application's
   * `url:<domain>` let go when the domain stopped being its workspace's: api/custom-domains.ts), releases of those
   * it drops.
   */
  private async relabelOps(key: ResourceKey, before: any, after: any): Promise<WriteOp[]> {
    const was = this.labelsOf(key, before);
    const now = this.labelsOf(key, after);
    const claim: string[] = [];
    for (const l of now) if (!was.includes(l) || !(await holdsLabel(this.store, l, key))) claim.push(l);
    return [
      ...(await claimLabelOps(this.store, claim, key)),
      ...(await releaseLabelOps(
        this.store,
        was.filter((l) => !now.includes(l)),
        key,
      )),
    ];
  }

  /** The one status verb; see `updateStatus` in status-writes.ts. */
  async updateStatus(key: ResourceKey, u: StatusUpdate): Promise<StoredObject | undefined> {
    this.checkServerSpec(key, u);
    return updateStatus(this.store, this.now, key, u);
  }

  /** `updateStatus` of several objects in one transaction, all or none; see `updateStatuses` in status-writes.ts. */
  async updateStatuses(updates: (StatusUpdate & { key: ResourceKey })[]): Promise<void> {
    for (const u of updates) this.checkServerSpec(u.key, u);
    return updateStatuses(this.store, this.now, updates);
  }

  /** A status write sets only spec fields its kind declares as the server's (`readOnlySpec`). */
  private checkServerSpec(key: ResourceKey, u: StatusUpdate) {
    const declared = u.spec ? (this.kind(key.kind).readOnlySpec ?? []) : [];
    for (const p of Object.keys(u.spec ?? {}))
      if (!declared.includes(p)) throw new Error(`${key.kind} spec${p} is not a field the server writes`);
  }

  /** Appends an event unless the last one says the same; see `recordEvent` in status-writes.ts. */
  recordEvent(key: ResourceKey, message: string, status?: Status): Promise<StoredObject | undefined> {
    return recordEvent(this.store, this.now, key, message, status);
  }

  /**
   * The response body: secrets redacted or left out (or opened for an admin asking `show_secrets`, and on the answer
   * to the create that sent them where the kind echoes them), computed fields added.
   */
  view(kd: KindDescriptor, o: StoredObject, showSecrets = false, createdNow = false): any {
    // Copies only what this function or a kind's decorate() changes: top-level fields, metadata, spec's top
    // level, and the whole spec when secrets are rewritten in it (a deep clone per read was a tenth of a GET).
    // Built by assignment to shallow copies, in the order the object literal `{ ...src, metadata: {...}, spec }`
    // had: properties added to a spread's result are slow on Node 20 (decision 083).
    const src = o.body;
    const body = copyShallow(src);
    const metadata = copyShallow(src.metadata);
    metadata.resourceVersion = userVersion(o);
    metadata.workspace = o.workspace;
    body.metadata = metadata;
    body.spec = kd.secrets?.length ? structuredClone(src.spec) : copyShallow(src.spec);
    const url = this.opts.urlOf?.(kd, o.workspace, body);
    if (url) body.metadata.url = url;
    visitSecrets(body.spec, kd.secrets, (v, _prev, place) => {
      if (showSecrets || (createdNow && place.path.echoedOnCreate)) return this.box.open(v);
      return place.path.omittedOnRead ? undefined : REDACTED;
    });
    dropEmptied(body.spec, kd.secrets);
    kd.decorate?.(body, this.now().getTime());
    return body;
  }

  /** Seals one secret value for storage (records that are not envelopes, e.g. a schedule's envs). */
  sealSecret(v: string): string {
    return v.startsWith('enc:v1:') ? v : this.box.seal(v);
  }

  /** Opens a value `sealSecret` sealed, for the runtime only. */
  openSecret(v: string): string {
    return this.box.open(v);
  }

  /** The spec with secrets opened, for the runtime only. */
  openSecrets(kd: KindDescriptor, spec: any): any {
    const out = structuredClone(spec);
    visitSecrets(out, kd.secrets, (v) => this.box.open(v));
    return out;
  }

  private async prepare(kd: KindDescriptor, ctx: WriteContext, raw: unknown, prev: StoredObject | undefined) {
    if (kd.readOnlyKind) throw new ApiError('METHOD_NOT_ALLOWED', `${kd.kind} objects are read-only`);
    const checked = checkBody(kd, raw);
    if (!checked.ok) throw invalid(checked.issues);
    const { body, unknown } = checked.value;
    if (ctx.strict && unknown.length)
      throw new ApiError('MALFORMED_REQUEST', `unknown fields: ${unknown.join(', ')}`, {
        errors: unknown.map((pointer) => ({ pointer, message: 'is not a known field' })),
      });
    const rv = body.metadata.resourceVersion;
    delete body.metadata.resourceVersion;
    const expectVersion = rv !== undefined && /^\d+$/.test(rv) ? Number(rv) : undefined;
    if (rv !== undefined && expectVersion === undefined)
      throw invalid([
        { pointer: '/metadata/resourceVersion', message: 'must be a resourceVersion read from the server' },
      ]);
    // A redacted value sent back (GET then PUT) keeps the stored secret; a new value replaces it. Below the admin
    // role, a kept secret stays where it was sent: changing its destination needs the secret itself.
    const redactedWithoutPrev: FieldIssue[] = [];
    const moved: FieldIssue[] = [];
    let keptSecrets = false;
    if (prev) restoreOmitted(body.spec, prev.body.spec, kd.secrets);
    visitSecrets(
      body.spec,
      kd.secrets,
      (v, p, place) => {
        if (v !== REDACTED) return v;
        keptSecrets = true;
        if (p === undefined)
          redactedWithoutPrev.push({
            pointer: '/spec',
            message: 'a redacted secret was sent with no stored value to keep',
          });
        else if (ctx.role !== 'admin')
          for (const pointer of movedDestinations(place))
            moved.push({
              pointer,
              message: `changes where the stored secret ${secretPointer(place)} is sent: send that secret again (or ask an admin)`,
            });
        return p;
      },
      prev?.body.spec,
    );
    if (redactedWithoutPrev.length) throw invalid(redactedWithoutPrev.slice(0, 1));
    if (moved.length)
      throw new ApiError(
        'FORBIDDEN',
        `a ${ctx.role ?? 'member'} cannot send a stored secret to a new destination: ${moved.map((m) => m.pointer).join(', ')} changed while the secret was sent back redacted; send the secret again, or ask an admin`,
        { errors: moved },
      );
    for (const p of kd.readOnlySpec ?? []) {
      const v = getPointer(prev?.body.spec, p);
      if (v !== undefined) setPointer(body.spec, p, structuredClone(v));
    }
    kd.defaults?.(body.spec, { regions: this.opts.regions });
    // Copies made only when something differs from the stored spec (each was a deep clone per replace).
    let prevView: Record<string, any> | undefined;
    if (prev) {
      prevView = copyShallow(prev.body);
      prevView.spec = kd.secrets?.length ? this.openSecrets(kd, prev.body.spec) : prev.body.spec;
    }
    const issues = [
      ...((await kd.validate?.(body, prevView, this.validationContext(ctx.workspace))) ?? []),
      ...(kd.immutable?.length
        ? immutableIssues(kd, body.spec, prev && this.defaulted(kd, prev.body.spec))
        : []),
    ];
    // A rule broken because a field was misspelled (`maxTokns`): the refusal names the slip too, not only its effect.
    if (issues.length) throw invalid([...issues, ...unknownFieldIssues(schemasOf(kd).input, unknown)]);
    const closed = await this.outboundIssues(kd, body.spec, prev?.body.spec);
    if (closed.length) throw invalid(closed);
    visitSecrets(body.spec, kd.secrets, (v) => (v.startsWith('enc:v1:') ? v : this.box.seal(v)));
    return { body, dropped: unknown, expectVersion, keptSecrets };
  }

  /**
   * The new or changed URLs of a spec that the outbound rules close (outbound/): one an earlier write stored is not
   * judged again here (it is at every connection), so tightened settings do not block unrelated changes.
   */
  private async outboundIssues(kd: KindDescriptor, spec: any, prevSpec: any): Promise<FieldIssue[]> {
    if (!kd.outboundTargets || !this.opts.outbound) return [];
    const was = new Set((prevSpec ? kd.outboundTargets(prevSpec) : []).map((t) => `${t.pointer} ${t.url}`));
    const fresh = kd.outboundTargets(spec).filter((t) => !was.has(`${t.pointer} ${t.url}`));
    const outbound = this.opts.outbound;
    const found = await Promise.all(fresh.map((t) => outbound.urlIssue(t.url, t.pointer)));
    return found.filter((i): i is FieldIssue => i !== undefined);
  }

  /**
   * A stored spec with today's defaults filled in: a record written before a default existed (e.g. a sandbox's
   * reported image) meant that default, so an immutable field it left out is not "changed" by a replace.
   */
  private defaulted(kd: KindDescriptor, spec: any) {
    if (!kd.defaults || !spec) return spec;
    const out = copyJson(spec);
    kd.defaults(out, { regions: this.opts.regions });
    return out;
  }

  private validationContext(workspace: string) {
    return {
      workspace,
      regions: this.opts.regions,
      nodeRegions: this.opts.nodeRegions?.(),
      exists: async (kind: string, name: string) =>
        !!(await this.store.get({ kind, workspace, parent: '', name })),
      specOf: async (kind: string, name: string) =>
        (await this.store.get({ kind, workspace, parent: '', name }))?.body.spec,
    };
  }

  private stamp(kd: KindDescriptor, ctx: WriteContext, body: any, prev: StoredObject | undefined) {
    const at = this.now();
    const now = isoTime(at);
    // Assignments to a shallow copy, not a spread with properties after it (slow on Node 20: decision 083).
    const meta = copyShallow(body.metadata);
    meta.workspace = ctx.workspace;
    meta.createdAt = prev?.body.metadata.createdAt ?? now;
    meta.createdBy = prev?.body.metadata.createdBy ?? ctx.actor;
    meta.updatedAt = now;
    meta.updatedBy = ctx.actor;
    (kd.parents ?? []).forEach((p, i) => {
      meta[p.metadataField] = ctx.parents[i];
    });
    // A replace that leaves out a writable extra (e.g. `externalId`) keeps it: clients send only what they know.
    for (const k of Object.keys(kd.metadataInput ?? {}))
      if (meta[k] === undefined && prev?.body.metadata?.[k] !== undefined) meta[k] = prev.body.metadata[k];
    kd.stampMetadata?.(meta);
    const specChanged = !prev || !sameJson(prev.body.spec, body.spec);
    meta.generation = (prev?.body.metadata.generation ?? 0) + (specChanged ? 1 : 0);
    meta.resourceVersion = String(Number(prev ? userVersion(prev) : 0) + 1);
    const out = copyShallow(body);
    out.metadata = meta;
    for (const k of Object.keys(kd.readOnly ?? {})) if (prev && k in prev.body) out[k] = prev.body[k];
    if (!kd.hasStatus) return out;
    out.events = prev?.body.events ?? [];
    out.status = prev?.body.status;
    if (!prev) return withEvent(out, 'DEPLOYING', `created by ${ctx.actor}`, at);
    // A changed spec is a new generation: the controller deploys it again.
    if (specChanged && out.status !== 'FAILED')
      return withEvent(out, 'DEPLOYING', `updated by ${ctx.actor}`, at);
    if (specChanged) return withEvent(out, 'DEPLOYING', `updated by ${ctx.actor}; retrying`, at);
    return out;
  }
}

/** The resourceVersion clients see: bumped by every client write, not by controllers' status writes. */
function userVersion(o: StoredObject): string {
  return o.body.metadata?.resourceVersion ?? String(o.resourceVersion);
}

function getPointer(obj: any, pointer: string) {
  return pointer
    .split('/')
    .slice(1)
    .reduce((o, k) => (o == null ? undefined : o[k]), obj);
}

function setPointer(obj: any, pointer: string, value: unknown) {
  const segs = pointer.split('/').slice(1);
  let cur = obj;
  for (const k of segs.slice(0, -1)) {
    if (cur[k] === null || typeof cur[k] !== 'object') cur[k] = {};
    cur = cur[k];
  }
  cur[segs.at(-1)!] = value;
}

function immutableIssues(kd: KindDescriptor, spec: any, prevSpec: any): FieldIssue[] {
  if (!prevSpec) return [];
  return (kd.immutable ?? [])
    .filter((p) => JSON.stringify(getPointer(spec, p)) !== JSON.stringify(getPointer(prevSpec, p)))
    .map((p) => ({ pointer: `/spec${p}`, message: 'cannot change after creation' }));
}
