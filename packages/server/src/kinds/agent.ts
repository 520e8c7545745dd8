// Agent (§2.2): a serverless deployment built from a repository, served at run_url/<ws>/agents/<name>.
import { Type } from './typebox.js';
import type { FieldIssue } from '../errors.js';
import {
  Env,
  envSecrets,
  Generation,
  literals,
  MemoryMb,
  NameList,
  opt,
  Quantity,
  Revision,
  Trigger,
  VolumeMount,
} from './common.js';
import {
  envIssues,
  imageIssues,
  referenceIssues,
  regionIssues,
  scaleIssues,
  scheduleIssues,
  triggerDefaults,
  tokenPolicyIssues,
  triggerIssues,
} from './rules.js';
import { triggerPathIssues } from './trigger-path.js';
import type { KindDescriptor, OutboundTarget, SecretPath, ValidationContext } from './types.js';

/** The stored last firing of an agent's schedule trigger (controllers/code/trigger-schedules.ts). */
export const AGENT_SCHEDULE_KIND = 'AgentSchedule';
export const AGENT_MEMORY_MB = 2048;
export const DEFAULT_MIN_SCALE = 0;
export const DEFAULT_MAX_SCALE = 10;
export const DEFAULT_GENERATION = 'mk3';
/** Fields beside status that the upload route and the controller write (kept across a client's PUT). */
export const WORKLOAD_READ_ONLY = {
  /** The last uploaded source, by digest. */
  source: Type.Object({ digest: Type.String(), size: Type.Integer(), uploadedAt: Type.String() }),
  /** The version of the last upload URL taken (decision 082): every URL issued at or before it is used. */
  uploadTaken: Type.Integer(),
  /** The revision taking the traffic (less the canary's share). */
  activeRevision: Type.String(),
  canaryRevision: Type.String(),
  /**
   * In a cluster, the node of each replica slot the controllers' leader keeps placed (agents and functions: one per
   * minScale, at least one; docs/decisions/086-replicas-across-nodes.md).
   */
  replicaNodes: Type.Array(Type.String()),
  /** Replicas running now (agents and functions, counted at each read: api/workload-replicas.ts; none for jobs). */
  replicas: Type.Integer({ minimum: 0 }),
  /** The kept revisions, newest first: the built app (content address), the source and the start command. */
  revisions: Type.Array(
    Type.Object({
      id: Type.String(),
      app: Type.String(),
      source: Type.String(),
      start: Type.String(),
      createdAt: Type.String(),
      /** The digest of the built app's archive, recorded at its build (decision 094). */
      appDigest: opt(Type.String()),
    }),
  ),
};

/** Upper bound of replicas one object may ask for; a quota can lower it. */
export const MAX_SCALE_LIMIT = 100;

export const Repository = Type.Object({
  type: opt(literals(['git', 'upload'])),
  url: opt(Type.String({ minLength: 1 })),
  /** The branch a git repository is cloned at (default: the remote's HEAD). */
  branch: opt(Type.String({ minLength: 1, maxLength: 255 })),
});

export const ScaledRuntime = {
  envs: opt(Type.Array(Env)),
  generation: opt(Generation),
  image: opt(Type.String({ minLength: 1 })),
  maxScale: opt(Type.Integer({ minimum: 0, maximum: MAX_SCALE_LIMIT })),
  memory: opt(MemoryMb),
  minScale: opt(Type.Integer({ minimum: 0, maximum: MAX_SCALE_LIMIT })),
  /** Seconds one inference request may last in all (the gateway cuts it then); unset: no cap but the idle one. */
  timeout: opt(Quantity('seconds', { minimum: 1, example: 900 })),
};

export const AgentSpec = Type.Object({
  enabled: opt(Type.Boolean()),
  integrationConnections: opt(NameList),
  policies: opt(NameList),
  public: opt(Type.Boolean()),
  region: opt(Type.String()),
  repository: opt(Repository),
  revision: opt(Revision),
  runtime: opt(Type.Object(ScaledRuntime)),
  triggers: opt(Type.Array(Trigger)),
  volumes: opt(Type.Array(VolumeMount)),
});

/**
 * The signing secret of a trigger's callbacks (§2.8: appears in responses only, redacted unless asked). It signs
 * what goes to the callbackUrl: moved to another receiver, it would make that receiver's copies of signed callbacks
 * ones the first receiver accepts, so it is sent again (or left out, for a new one) when callbackUrl changes.
 */
export const callbackSecrets: SecretPath = {
  path: ['triggers', '*', 'configuration', 'callbackSecret'],
  sentTo: { at: 3, fields: ['callbackUrl'] },
};

/**
 * Where a code-built workload makes Berth send requests: each trigger's callbackUrl, and a git repository's host
 * (a local path or file:// is BERTH_GIT_ALLOW_LOCAL's to judge, at the clone).
 */
export function workloadTargets(spec: any): OutboundTarget[] {
  const out: OutboundTarget[] = [];
  (Array.isArray(spec?.triggers) ? spec.triggers : []).forEach((t: any, i: number) => {
    const url = t?.configuration?.callbackUrl;
    if (typeof url === 'string') out.push({ pointer: `/spec/triggers/${i}/configuration/callbackUrl`, url });
  });
  const r = spec?.repository;
  if (r?.type === 'git' && typeof r.url === 'string' && !r.url.startsWith('/') && !/^file:/i.test(r.url))
    out.push({ pointer: '/spec/repository/url', url: r.url });
  return out;
}

const writableVolume = (v: { readOnly?: boolean }) => v.readOnly !== true;

/** Defaults shared by the scaled, code-built kinds (agent, function). */
export function scaledDefaults(spec: any, regions: string[], memory: number) {
  spec.enabled ??= true;
  spec.region ??= regions[0];
  spec.runtime ??= {};
  spec.runtime.memory ??= memory;
  spec.runtime.minScale ??= DEFAULT_MIN_SCALE;
  // A writable volume is mounted by one replica at a time (workloadVolumeIssues): unasked, the workload runs one.
  const writable = Array.isArray(spec.volumes) && spec.volumes.some(writableVolume);
  spec.runtime.maxScale ??= Math.max(writable ? 1 : DEFAULT_MAX_SCALE, spec.runtime.minScale);
  spec.runtime.generation ??= DEFAULT_GENERATION;
  triggerDefaults(spec.triggers);
}

/**
 * A writable volume is one ext4 filesystem that every replica would write at once, with nothing to arbitrate
 * between them (decision 034): it needs one replica (maxScale 1) and no canary revision running beside the
 * active one. Read-only volumes are mounted by every replica. Judged like a job's maxConcurrentTasks (job.ts).
 */
export function workloadVolumeIssues(s: {
  volumes?: { readOnly?: boolean }[];
  runtime?: { maxScale?: number };
  revision?: { canary?: string; canaryPercent?: number };
}) {
  const scaled = (s.runtime?.maxScale ?? DEFAULT_MAX_SCALE) > 1;
  const canary = !!s.revision?.canary && (s.revision?.canaryPercent ?? 0) > 0;
  if (!scaled && !canary) return [];
  const why = scaled
    ? `runtime.maxScale ${s.runtime?.maxScale ?? DEFAULT_MAX_SCALE} would let several replicas write it at once, so it needs runtime.maxScale 1`
    : `the canary revision's replicas would write it beside the active one's, so it needs no canary (revision.canaryPercent 0)`;
  return (s.volumes ?? []).flatMap((v, i) =>
    writableVolume(v)
      ? [
          {
            pointer: `/spec/volumes/${i}/readOnly`,
            message: `a writable volume is mounted by every replica: ${why}; mount it readOnly to share it between replicas`,
          },
        ]
      : [],
  );
}

/** The objects an agent's or function's spec names (connections, policies, volumes) exist in its workspace. */
export async function workloadReferenceIssues(
  ctx: ValidationContext,
  s: any,
  p: any,
  subject: 'agent' | 'function',
): Promise<FieldIssue[]> {
  return [
    ...(await referenceIssues(
      ctx,
      'IntegrationConnection',
      s.integrationConnections,
      p?.integrationConnections,
      (i) => `/spec/integrationConnections/${i}`,
    )),
    ...(await referenceIssues(ctx, 'Policy', s.policies, p?.policies, (i) => `/spec/policies/${i}`)),
    ...(await tokenPolicyIssues(ctx, s.policies, subject)),
    ...(await referenceIssues(
      ctx,
      'Volume',
      s.volumes?.map((v: any) => v.name),
      p?.volumes?.map((v: any) => v.name),
      (i) => `/spec/volumes/${i}/name`,
    )),
  ];
}

export const agent = {
  kind: 'Agent',
  plural: 'agents',
  aliases: ['agent', 'ag'],
  path: '/agents',
  nameParam: 'agentName',
  description:
    'Serverless agent deployment built from a code repository, exposed as an auto-scaling endpoint.',
  spec: AgentSpec,
  hasStatus: true,
  readOnly: WORKLOAD_READ_ONLY,
  ownedRecords: [AGENT_SCHEDULE_KIND],
  secrets: [envSecrets('runtime', 'envs'), callbackSecrets],
  outboundTargets: workloadTargets,
  defaults(spec, { regions }) {
    scaledDefaults(spec, regions, AGENT_MEMORY_MB);
  },
  async validate(next, prev, ctx) {
    const s = next.spec;
    const p = prev?.spec;
    return [
      ...regionIssues(s.region, ctx),
      ...scaleIssues(s.runtime),
      ...workloadVolumeIssues(s),
      ...imageIssues(s.runtime?.image),
      ...envIssues(s.runtime?.envs, '/spec/runtime/envs'),
      ...triggerIssues(s.triggers, false),
      ...triggerPathIssues('Agent', next.metadata?.name, s.triggers),
      ...scheduleIssues(s.triggers),
      ...(await workloadReferenceIssues(ctx, s, p, 'agent')),
    ];
  },
} satisfies KindDescriptor;
