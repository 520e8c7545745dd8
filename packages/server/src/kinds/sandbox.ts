// Sandbox (§2.4): a lightweight VM for code execution that scales to zero in standby and keeps its memory.
import { randomBytes } from 'node:crypto';
import { Type } from './typebox.js';
import type { FieldIssue } from '../errors.js';
import {
  Duration,
  DURATION_MESSAGE,
  Env,
  envSecrets,
  ExternalId,
  Generation,
  literals,
  MemoryMb,
  opt,
  Port,
  StringMap,
  Timestamp,
  VolumeMount,
} from './common.js';
import { durationMs, envIssues, imageIssues, isIsoDate, referenceIssues, regionIssues } from './rules.js';
import type { KindDescriptor } from './types.js';

/** The image a sandbox created without one reports: the service's default name (docs/compat.md). */
export const DEFAULT_SANDBOX_IMAGE = 'blaxel/base-image:latest';
/** The service's SDK default (docs/compat.md). */
export const SANDBOX_MEMORY_MB = 4096;
/** Record kinds of a sandbox's schedules and their executions (api/sandbox-schedules.ts), removed with it. */
export const SCHEDULE_KIND = 'SandboxSchedule';
/**
 * Snapshots (decision 053): records of the workspace, keyed by id, not owned by the sandbox they were captured from
 * (they outlive it).
 */
export const SNAPSHOT_KIND = 'SandboxSnapshot';
export const SCHEDULE_EXECUTION_KIND = 'SandboxScheduleExecution';
export const EXPIRATION_TYPES = ['ttl-idle', 'ttl-max-age', 'date'] as const;
export const EXPIRATION_ACTIONS = ['delete'] as const;
export const SANDBOX_STATES = ['RUNNING', 'STANDBY'] as const;

/** A list of domain patterns: the specification's string form (comma or space separated) or the SDK's array. */
const DomainList = Type.Union([Type.String(), Type.Array(Type.String())]);
/** The specification has headers and body as strings; the SDK sends maps. Both are accepted. */
const Injected = Type.Union([Type.String(), StringMap]);

export const SandboxNetwork = Type.Object({
  allowedDomains: opt(DomainList),
  forbiddenDomains: opt(DomainList),
  egress: opt(
    Type.Object({
      gateway: opt(Type.String()),
      mode: opt(literals(['direct', 'gateway'])),
      policies: opt(
        Type.Array(
          Type.Object({
            destinations: opt(Type.Array(Type.String())),
            mode: opt(literals(['allow', 'deny'])),
            name: opt(Type.String()),
          }),
        ),
      ),
    }),
  ),
  proxy: opt(
    Type.Object({
      allowedDomains: opt(DomainList),
      forbiddenDomains: opt(DomainList),
      bypass: opt(Type.Array(Type.String())),
      routing: opt(
        Type.Array(
          Type.Object({
            body: opt(Injected),
            destinations: opt(Type.Array(Type.String())),
            headers: opt(Injected),
            secrets: opt(StringMap),
          }),
        ),
      ),
    }),
  ),
});

export const SandboxSpec = Type.Object({
  enabled: opt(Type.Boolean()),
  lifecycle: opt(
    Type.Object({
      expirationPolicies: opt(
        Type.Array(
          Type.Object({
            action: opt(literals(EXPIRATION_ACTIONS)),
            type: literals(EXPIRATION_TYPES),
            value: Type.String({ minLength: 1 }),
          }),
        ),
      ),
      terminatedRetention: opt(Duration),
    }),
  ),
  network: opt(SandboxNetwork),
  region: opt(Type.String()),
  runtime: opt(
    Type.Object({
      envs: opt(Type.Array(Env)),
      /** ISO date at which the sandbox is deleted. */
      expires: opt(Timestamp),
      /**
       * The service's kernel-variant switches (`iptables`, `nfs`, `tun`: `enabled`|`disabled`). Stored and returned;
       * Berth's sandboxes share the host kernel, so the controller says in an event which it could not apply.
       */
      extraArgs: opt(StringMap),
      generation: opt(Generation),
      image: opt(Type.String({ minLength: 1 })),
      memory: opt(MemoryMb),
      ports: opt(Type.Array(Port)),
      /** The service's snapshot switch; Berth has no snapshots, which the controller reports in an event. */
      snapshotEnabled: opt(Type.Boolean()),
      /** Seconds a stopping sandbox's processes get between SIGTERM and SIGKILL (the service's field). */
      terminationGracePeriodSeconds: opt(Type.Integer({ minimum: 0, maximum: 3600 })),
      /** Max age from creation. */
      ttl: opt(Duration),
    }),
  ),
  volumes: opt(Type.Array(VolumeMount)),
});

const DOMAIN_PATTERN = /^(\*|(\*\.)?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*)$/i;

export const domainsOf = (v: string | string[] | undefined): string[] =>
  v === undefined ? [] : (Array.isArray(v) ? v : v.split(/[\s,]+/)).map((d) => d.trim()).filter(Boolean);

const PLACEHOLDER = /\{\{SECRET:([^}]+)\}\}/g;

function networkIssues(n: any): FieldIssue[] {
  const out: FieldIssue[] = [];
  if (!n) return out;
  for (const [path, list] of [
    ['allowedDomains', n.allowedDomains],
    ['forbiddenDomains', n.forbiddenDomains],
    ['proxy/allowedDomains', n.proxy?.allowedDomains],
    ['proxy/forbiddenDomains', n.proxy?.forbiddenDomains],
  ]) {
    const bad = domainsOf(list).filter((d) => !DOMAIN_PATTERN.test(d));
    if (bad.length)
      out.push({ pointer: `/spec/network/${path}`, message: `not domain patterns: ${bad.join(', ')}` });
  }
  if (n.egress?.mode === 'gateway' && !n.egress.gateway)
    out.push({
      pointer: '/spec/network/egress/gateway',
      message: 'egress mode gateway needs a gateway name',
    });
  (n.proxy?.routing ?? []).forEach((r: any, i: number) => {
    for (const field of ['headers', 'body']) {
      const text = typeof r[field] === 'string' ? r[field] : JSON.stringify(r[field] ?? {});
      for (const m of text.matchAll(PLACEHOLDER))
        if (!(m[1] in (r.secrets ?? {})))
          out.push({
            pointer: `/spec/network/proxy/routing/${i}/${field}`,
            message: `{{SECRET:${m[1]}}} names no entry of this rule's secrets`,
          });
    }
  });
  return out;
}

function lifecycleIssues(l: any): FieldIssue[] {
  const out: FieldIssue[] = [];
  (l?.expirationPolicies ?? []).forEach((p: any, i: number) => {
    const ok = p.type === 'date' ? isIsoDate(p.value) : durationMs(p.value) !== undefined;
    if (!ok)
      out.push({
        pointer: `/spec/lifecycle/expirationPolicies/${i}/value`,
        message: p.type === 'date' ? 'must be an ISO 8601 date like 2030-01-31' : DURATION_MESSAGE,
      });
  });
  return out;
}

function portIssues(ports: { target: number }[] | undefined): FieldIssue[] {
  const seen = new Set<number>();
  const out: FieldIssue[] = [];
  (ports ?? []).forEach((p, i) => {
    if (seen.has(p.target))
      out.push({ pointer: `/spec/runtime/ports/${i}/target`, message: `duplicates port ${p.target}` });
    seen.add(p.target);
  });
  return out;
}

/**
 * When a sandbox's age counts from: the moment it first ran (`readyAt`), so a create that took long does not eat
 * its TTL (decision 047); while it is still starting, `nowMs` (it cannot expire before it ran); one that never ran
 * (FAILED) counts from its creation.
 */
function ageStartMs(obj: any, nowMs: number): number {
  const ready = Date.parse(obj.readyAt ?? '');
  if (Number.isFinite(ready)) return ready;
  if (obj.status === 'DEPLOYING') return nowMs;
  return Date.parse(obj.metadata?.createdAt ?? '');
}

/**
 * When the sandbox is deleted automatically, in epoch ms: the earliest of runtime.ttl and ttl-max-age (max age from
 * when it first ran), runtime.expires and a `date` policy, and ttl-idle (from the last use). Undefined without any.
 */
export function expiresAtMs(obj: any, nowMs: number = Date.now()): number | undefined {
  const start = ageStartMs(obj, nowMs);
  const lastUsed = Date.parse(obj.lastUsedAt ?? '') || start;
  const rt = obj.spec?.runtime ?? {};
  const candidates: number[] = [];
  const ttl = durationMs(rt.ttl);
  if (ttl !== undefined) candidates.push(start + ttl);
  if (rt.expires) candidates.push(Date.parse(rt.expires));
  for (const p of obj.spec?.lifecycle?.expirationPolicies ?? []) {
    if (p.type === 'date') candidates.push(Date.parse(p.value));
    else if (p.type === 'ttl-max-age') candidates.push(start + (durationMs(p.value) ?? Number.NaN));
    else if (p.type === 'ttl-idle') candidates.push(lastUsed + (durationMs(p.value) ?? Number.NaN));
  }
  const valid = candidates.filter((c) => Number.isFinite(c));
  return valid.length ? Math.min(...valid) : undefined;
}

export const sandbox = {
  kind: 'Sandbox',
  plural: 'sandboxes',
  aliases: ['sandbox', 'sbx'],
  path: '/sandboxes',
  nameParam: 'sandboxName',
  description: 'Lightweight virtual machine for code execution; resumes from standby and keeps its memory.',
  spec: SandboxSpec,
  metadataInput: { externalId: ExternalId },
  ownedRecords: [SCHEDULE_KIND, SCHEDULE_EXECUTION_KIND],
  hasStatus: true,
  // A running sandbox keeps its memory limit and root image: changing either would mean a new sandbox.
  // extraArgs chooses the service's kernel variant, which is fixed for a sandbox's life there too.
  // Volumes are mounted when the sandbox starts; a running one cannot gain or lose one (recreate it).
  immutable: ['/runtime/memory', '/runtime/image', '/runtime/extraArgs', '/volumes'],
  readOnly: {
    state: literals(SANDBOX_STATES),
    /** Seconds until automatic deletion; present only when a TTL, expiry or policy is set. */
    expiresIn: Type.Integer({ minimum: 0 }),
    lastUsedAt: Type.String(),
    /** When the sandbox first ran: its TTL and ttl-max-age count from here. */
    readyAt: Type.String(),
    /**
     * The snapshot layers the sandbox's root stands on (decision 053), topmost first: set by a restore, a fork or an
     * archive; its own writes go over them.
     */
    rootLayers: Type.Array(Type.String()),
    /** The snapshot the sandbox was last restored or forked from. */
    restoredFrom: Type.String(),
    /**
     * In a cluster, the node the sandbox is placed on (its id as `berth get nodes` lists it): set when it is created,
     * changed only when that node leaves (docs/decisions/059-cluster-placement.md).
     */
    node: Type.String(),
  },
  secrets: [
    envSecrets('runtime', 'envs'),
    // Filled into requests to the rule's destinations by the egress proxy: they decide who receives the secret.
    // As the service does, reads omit them and the create's answer shows what was sent (decision 047).
    {
      path: ['network', 'proxy', 'routing', '*', 'secrets', '*'],
      sentTo: { at: 4, fields: ['destinations'] },
      omittedOnRead: true,
      echoedOnCreate: true,
    },
  ],
  generateName: () => `sandbox-${randomBytes(4).toString('hex')}`,
  defaults(spec, { regions }) {
    spec.enabled ??= true;
    spec.region ??= regions[0];
    spec.runtime ??= {};
    spec.runtime.memory ??= SANDBOX_MEMORY_MB;
    // Reported as the service reports it; the runtime maps this name to its base image (the host userland).
    spec.runtime.image ??= DEFAULT_SANDBOX_IMAGE;
    for (const p of spec.lifecycle?.expirationPolicies ?? []) p.action ??= 'delete';
  },
  async validate(next, prev, ctx) {
    const s = next.spec;
    return [
      // Placed on a node of its region: any region a node of the cluster serves (cluster/instance-holder.ts).
      ...regionIssues(s.region, ctx, '/spec/region', ctx.nodeRegions),
      ...envIssues(s.runtime?.envs, '/spec/runtime/envs'),
      ...portIssues(s.runtime?.ports),
      ...lifecycleIssues(s.lifecycle),
      ...networkIssues(s.network),
      ...imageIssues(s.runtime?.image),
      ...(await referenceIssues(
        ctx,
        'Volume',
        s.volumes?.map((v: any) => v.name),
        prev?.spec.volumes?.map((v: any) => v.name),
        (i) => `/spec/volumes/${i}/name`,
      )),
    ];
  },
  decorate(obj, nowMs) {
    const at = expiresAtMs(obj, nowMs);
    if (at === undefined) delete obj.expiresIn;
    // Rounded up: 0 says the time is up, never that less than a second is left.
    else obj.expiresIn = Math.max(0, Math.ceil((at - nowMs) / 1000));
    // Past its expiry a sandbox reads as TERMINATED at once, as the service's does; the sweep (at most
    // EXPIRY_SWEEP_MS later) stops it and writes the record.
    if (at !== undefined && at <= nowMs && obj.status !== 'TERMINATED') obj.status = 'TERMINATED';
  },
} satisfies KindDescriptor;
