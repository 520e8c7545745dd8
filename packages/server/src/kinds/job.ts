// Batch job (§2.5): a definition whose executions run tasks in parallel with retries and a timeout.
import { Type } from './typebox.js';
import {
  Env,
  envSecrets,
  Generation,
  literals,
  MemoryMb,
  MountPath,
  Name,
  NameList,
  opt,
  Port,
  Quantity,
  Revision,
  Trigger,
} from './common.js';
import { callbackSecrets, Repository, WORKLOAD_READ_ONLY, workloadTargets } from './agent.js';
import {
  envIssues,
  imageIssues,
  referenceIssues,
  regionIssues,
  scheduleIssues,
  tokenPolicyIssues,
  triggerDefaults,
  triggerIssues,
} from './rules.js';
import type { KindDescriptor } from './types.js';

/** The stored last firing of a job's schedule trigger (controllers/code/trigger-schedules.ts). */
export const JOB_SCHEDULE_KIND = 'JobSchedule';
export const JOB_MEMORY_MB = 1024;
export const DEFAULT_MAX_CONCURRENT_TASKS = 1;
export const DEFAULT_MAX_RETRIES = 0;
/** Seconds one task may run. */
export const DEFAULT_TIMEOUT_S = 900;
/** A day: longer work belongs in a sandbox. */
export const MAX_TIMEOUT_S = 86_400;

/** `ephemeral` is the service SDK's word for an emptydir volume. */
export const JOB_VOLUME_TYPES = ['emptydir', 'persistent', 'ephemeral'] as const;

export const JobVolume = Type.Object({
  mountPath: MountPath,
  name: Name,
  sizeMb: opt(Quantity('MB', { minimum: 1, example: 1024 })),
  type: opt(literals(JOB_VOLUME_TYPES)),
  readOnly: opt(Type.Boolean()),
});

export const JobSpec = Type.Object({
  enabled: opt(Type.Boolean()),
  githubRunner: opt(Type.Object({ repositories: opt(Type.String()) })),
  policies: opt(NameList),
  region: opt(Type.String()),
  repository: opt(Repository),
  revision: opt(Revision),
  runtime: opt(
    Type.Object({
      diskPercent: opt(Type.Integer({ minimum: 0, maximum: 100 })),
      envs: opt(Type.Array(Env)),
      generation: opt(Generation),
      image: opt(Type.String({ minLength: 1 })),
      maxConcurrentTasks: opt(Type.Integer({ minimum: 1, maximum: 1000 })),
      maxRetries: opt(Type.Integer({ minimum: 0, maximum: 100 })),
      memory: opt(MemoryMb),
      ports: opt(Type.Array(Port)),
      timeout: opt(Quantity('seconds', { minimum: 1, maximum: MAX_TIMEOUT_S, example: DEFAULT_TIMEOUT_S })),
    }),
  ),
  triggers: opt(Type.Array(Trigger)),
  volumes: opt(Type.Array(JobVolume)),
});

export const isPersistentJobVolume = (v: { type?: string }) => (v.type ?? 'persistent') === 'persistent';
const isPersistent = isPersistentJobVolume;

/**
 * A persistent volume is held by the job and bound into its tasks (decision 029). Written by several tasks at
 * once it would be a race nobody asked for: a writable one needs maxConcurrentTasks 1 (tasks take turns);
 * read-only ones are shared by every task. `emptydir` volumes are each task's own scratch space, which every
 * task sandbox's writable layer already is.
 */
function persistentVolumeIssues(s: { volumes?: { type?: string; readOnly?: boolean }[]; runtime?: any }) {
  const parallel = (s.runtime?.maxConcurrentTasks ?? DEFAULT_MAX_CONCURRENT_TASKS) > 1;
  return (s.volumes ?? []).flatMap((v, i) =>
    isPersistent(v) && !v.readOnly && parallel
      ? [
          {
            pointer: `/spec/volumes/${i}/readOnly`,
            message:
              'a writable persistent volume is shared by all the job\'s tasks, so it needs runtime.maxConcurrentTasks 1; mount it readOnly to share it between parallel tasks, or use type "emptydir" for per-task scratch space',
          },
        ]
      : [],
  );
}

export const job = {
  kind: 'Job',
  plural: 'jobs',
  aliases: ['job'],
  path: '/jobs',
  nameParam: 'jobId',
  description: 'Batch job: parallel tasks with configurable parallelism, retries and timeout.',
  spec: JobSpec,
  hasStatus: true,
  readOnly: WORKLOAD_READ_ONLY,
  ownedRecords: [JOB_SCHEDULE_KIND],
  secrets: [envSecrets('runtime', 'envs'), callbackSecrets],
  outboundTargets: workloadTargets,
  defaults(spec, { regions }) {
    spec.enabled ??= true;
    spec.region ??= regions[0];
    spec.runtime ??= {};
    spec.runtime.memory ??= JOB_MEMORY_MB;
    spec.runtime.maxConcurrentTasks ??= DEFAULT_MAX_CONCURRENT_TASKS;
    spec.runtime.maxRetries ??= DEFAULT_MAX_RETRIES;
    spec.runtime.timeout ??= DEFAULT_TIMEOUT_S;
    triggerDefaults(spec.triggers);
  },
  async validate(next, prev, ctx) {
    const s = next.spec;
    const p = prev?.spec;
    const persistent = (vs: any[] | undefined) => vs?.map((v) => (isPersistent(v) ? v.name : undefined));
    return [
      ...regionIssues(s.region, ctx),
      ...persistentVolumeIssues(s),
      ...scheduleIssues(s.triggers),
      ...imageIssues(s.runtime?.image),
      ...envIssues(s.runtime?.envs, '/spec/runtime/envs'),
      ...triggerIssues(s.triggers),
      ...(await referenceIssues(ctx, 'Policy', s.policies, p?.policies, (i) => `/spec/policies/${i}`)),
      ...(await tokenPolicyIssues(ctx, s.policies, 'job')),
      ...(await referenceIssues(
        ctx,
        'Volume',
        persistent(s.volumes),
        persistent(p?.volumes),
        (i) => `/spec/volumes/${i}/name`,
      )),
    ];
  },
} satisfies KindDescriptor;
