// One attempt of one job task in its own runtime sandbox, on the image the job's app was built on: the app bound
// read-only at /app (as replicas have it), the start command run by the in-sandbox daemon under the job's timeout
// (the daemon sends SIGTERM, then SIGKILL after its grace period), the exit code and output collected, the sandbox
// removed. An attempt left running by an earlier server is re-adopted by polling its process (the daemon keeps it
// running meanwhile).
import type { BuiltApp } from '../../builds/builder.js';
import { isPersistentJobVolume } from '../../kinds/job.js';
import { defaultCpuShares, type VolumeMount } from '../../runtime/driver.js';
import type { Held, Instances } from '../../runtime/instances.js';
import type { ProcessJson } from '../../sandbox-api/schema.js';
import type { Resources } from '../../store/resources.js';
import { APP_DIR, APP_IMAGE, APP_PATH, APP_PIDS_MAX, imageFields } from '../code/app.js';
import { attachVolumes, holderName } from '../volume/volume-attach.js';
import type { ExecutionRecord } from './job-store.js';

/** Id prefix of task sandboxes (never a Sandbox object's, a replica's or a build's). */
export const TASK_ID_PREFIX = 'job-';
/** The daemon's name for the task's process, so a restarted server finds it again. */
export const TASK_PROCESS = 'task';
/** How often a re-adopted attempt is looked at (only attempts that outlived a server restart are polled). */
export const ADOPT_POLL_MS = 500;

export interface TaskAttempt {
  sandboxId: string;
  /** The job's workspace and name: the owner recorded with the instance. */
  workspace: string;
  job: string;
  appDir: string;
  /** The stored image the app was built on (by id) and its PATH (imageFields); none: the default image. */
  image?: string;
  path?: string;
  start: string;
  memoryMb: number;
  envs: Record<string, string>;
  timeoutS: number;
  /** The job's persistent volumes, already attached to it (controllers/volume/volume-attach.ts). */
  volumes?: VolumeMount[];
  /** Settles true once the attempt is recorded (the process starts only then); false: it must not start. */
  ready?: Promise<boolean>;
  /** The task's slot in its workspace's quotas: the instance holds it (given back when its process ends). */
  lease?: Held;
}

export interface AttemptResult {
  exitCode: number;
  /** The daemon killed it at the timeout (`killed`), rather than it exiting or being stopped. */
  timedOut: boolean;
  logs: string;
}

export interface TaskDeps {
  instances: Instances;
}

const resultOf = (p: ProcessJson): AttemptResult => ({
  exitCode: p.exitCode,
  timedOut: p.status === 'killed',
  logs: p.logs,
});

/** What an attempt of task `index` of execution `rec` runs with: the job's envs (secrets opened) and volumes. */
export async function attemptOf(
  deps: TaskDeps & { resources: Resources },
  p: {
    workspace: string;
    rec: ExecutionRecord;
    index: number;
    attempt: number;
    input: unknown;
    sandboxId: string;
    built: BuiltApp;
    /** The execution's task credential (BL_API_KEY). */
    credential: string;
  },
): Promise<TaskAttempt> {
  const { workspace, rec, built } = p;
  const job = await deps.resources.store.get({ kind: 'Job', workspace, parent: '', name: rec.job });
  const open = job ? deps.resources.openSecrets(deps.resources.kind('Job'), job.body.spec ?? {}) : {};
  const envs: Record<string, string> = { BL_API_KEY: p.credential, ...(built.plan.manifest?.env ?? {}) };
  for (const e of open.runtime?.envs ?? []) envs[e.name] = e.value ?? '';
  Object.assign(envs, rec.envOverride ?? {}, {
    BL_WORKSPACE: workspace,
    BL_NAME: rec.job,
    BL_EXECUTION_ID: rec.id,
    TASK_INDEX: String(p.index),
    BL_TASK_ATTEMPT: String(p.attempt),
    BL_EXECUTION_DATA_URL: executionDataUrl(p.index, p.input),
  });
  // Persistent volumes are held by the job (one holder: `job:<name>`) and bound into every task.
  const volumes = await attachVolumes(
    deps.resources,
    deps.instances.driver,
    workspace,
    holderName('job', rec.job),
    (open.volumes ?? []).filter(isPersistentJobVolume),
  );
  return {
    volumes,
    sandboxId: p.sandboxId,
    workspace,
    job: rec.job,
    appDir: built.dir,
    ...imageFields(built.base),
    start: built.plan.start,
    memoryMb: rec.memoryMb,
    envs,
    timeoutS: rec.timeoutS,
  };
}

/**
 * Runs one attempt to its end; undefined when `ready` says it must not start. Infrastructure failures throw (the
 * caller counts them as a failed attempt).
 */
export async function runAttempt(deps: TaskDeps, t: TaskAttempt): Promise<AttemptResult | undefined> {
  const envs = { ...t.envs, PATH: t.path ?? APP_PATH };
  const { daemon } = await deps.instances.start({
    id: t.sandboxId,
    spec: {
      memoryMb: t.memoryMb,
      pidsMax: APP_PIDS_MAX,
      cpuShares: defaultCpuShares(t.memoryMb),
      diskMb: t.memoryMb,
      envs,
      image: t.image ?? APP_IMAGE,
      volumes: [
        ...(t.appDir ? [{ hostPath: t.appDir, mountPath: APP_DIR, readOnly: true }] : []),
        ...(t.volumes ?? []),
      ],
    },
    owner: { kind: 'Job', workspace: t.workspace, name: t.job, role: 'task' },
    lease: t.lease,
  });
  if (t.ready && !(await t.ready)) return undefined;
  const p = await daemon.start({
    command: t.start,
    name: TASK_PROCESS,
    ...(t.appDir ? { workingDir: APP_DIR } : {}),
    env: envs,
    waitForCompletion: true,
    timeout: t.timeoutS,
  });
  return resultOf(p);
}

/**
 * Waits for an attempt started by an earlier server: its result once its process ends, or undefined when the
 * sandbox or the process is gone (the attempt is lost and runs again).
 */
export async function adoptAttempt(
  deps: TaskDeps,
  sandboxId: string,
  signal: AbortSignal,
): Promise<AttemptResult | undefined> {
  for (;;) {
    const info = await deps.instances.driver.inspect(sandboxId);
    if (!info || info.state === 'dead') return undefined;
    const p = await deps.instances
      .daemon(info)
      .process(TASK_PROCESS)
      .catch(() => undefined);
    if (!p) return undefined;
    if (p.status !== 'running') return resultOf(p);
    if (signal.aborted) return undefined;
    await new Promise((r) => setTimeout(r, ADOPT_POLL_MS));
  }
}

/** Asks the daemon to stop the task (SIGTERM to its process group, SIGKILL after the daemon's grace period). */
export async function stopAttempt(deps: TaskDeps, sandboxId: string): Promise<void> {
  const info = await deps.instances.driver.inspect(sandboxId);
  if (info) await deps.instances.daemon(info).stop(TASK_PROCESS);
}

/** The task's input as `blStartJob` reads it: `tasks[TASK_INDEX]` of the JSON at BL_EXECUTION_DATA_URL. */
export function executionDataUrl(index: number, input: unknown): string {
  const tasks: unknown[] = new Array(index).fill(null);
  tasks.push(input ?? {});
  return `data:application/json;base64,${Buffer.from(JSON.stringify({ tasks })).toString('base64')}`;
}
