// One attempt of one job task in its own runtime sandbox, on the image the job's app was built on: the app bound
// read-only at /app (as replicas have it), the start command run by the in-sandbox daemon under the job's timeout
// (the daemon sends SIGTERM, then SIGKILL after its grace period), the exit code and output collected, the sandbox
// removed. An attempt left running by an earlier server is re-adopted by polling its process (the daemon keeps it
// running meanwhile).
import { request } from 'node:http';
import { execJson, processInfo } from '../builds/daemon-exec.js';
import { defaultCpuShares, type RuntimeDriver, type VolumeMount } from '../runtime/driver.js';
import type { ProcessJson } from '../sandbox-api/schema.js';
import { APP_DIR, APP_PATH, REPLICA_IMAGE, REPLICA_PIDS_MAX } from './replicas.js';

/** Id prefix of task sandboxes (never a Sandbox object's, a replica's or a build's). */
export const TASK_ID_PREFIX = 'job-';
/** The daemon's name for the task's process, so a restarted server finds it again. */
export const TASK_PROCESS = 'task';
/** How often a re-adopted attempt is looked at (only attempts that outlived a server restart are polled). */
export const ADOPT_POLL_MS = 500;

export interface TaskAttempt {
  sandboxId: string;
  /** The job's workspace (recorded with the sandbox: which images it has in use). */
  workspace: string;
  appDir: string;
  /** The stored image the app was built on (by id) and its PATH (imageFields); none: the default image. */
  image?: string;
  path?: string;
  start: string;
  memoryMb: number;
  envs: Record<string, string>;
  timeoutS: number;
  /** The job's persistent volumes, already attached to it (controllers/volume-attach.ts). */
  volumes?: VolumeMount[];
  /** Settles true once the attempt is recorded (the process starts only then); false: it must not start. */
  ready?: Promise<boolean>;
}

export interface AttemptResult {
  exitCode: number;
  /** The daemon killed it at the timeout (`killed`), rather than it exiting or being stopped. */
  timedOut: boolean;
  logs: string;
}

export interface TaskDeps {
  driver: RuntimeDriver;
  waitHealthy: (socketPath: string, signal?: AbortSignal) => Promise<unknown>;
}

const resultOf = (p: ProcessJson): AttemptResult => ({
  exitCode: p.exitCode,
  timedOut: p.status === 'killed',
  logs: p.logs,
});

/**
 * Runs one attempt to its end; undefined when `ready` says it must not start. Infrastructure failures throw (the
 * caller counts them as a failed attempt).
 */
export async function runAttempt(deps: TaskDeps, t: TaskAttempt): Promise<AttemptResult | undefined> {
  const envs = { ...t.envs, PATH: t.path ?? APP_PATH };
  const info = await deps.driver.ensure(t.sandboxId, {
    memoryMb: t.memoryMb,
    pidsMax: REPLICA_PIDS_MAX,
    cpuShares: defaultCpuShares(t.memoryMb),
    diskMb: t.memoryMb,
    envs,
    image: t.image ?? REPLICA_IMAGE,
    workspace: t.workspace,
    volumes: [
      ...(t.appDir ? [{ hostPath: t.appDir, mountPath: APP_DIR, readOnly: true }] : []),
      ...(t.volumes ?? []),
    ],
  });
  await deps.waitHealthy(info.socketPath);
  if (t.ready && !(await t.ready)) return undefined;
  const p = await execJson(info.socketPath, {
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
    const info = await deps.driver.inspect(sandboxId);
    if (!info || info.state === 'dead') return undefined;
    const p = await processInfo(info.socketPath, TASK_PROCESS).catch(() => undefined);
    if (!p) return undefined;
    if (p.status !== 'running') return resultOf(p);
    if (signal.aborted) return undefined;
    await new Promise((r) => setTimeout(r, ADOPT_POLL_MS));
  }
}

/** Asks the daemon to stop the task (SIGTERM to its process group, SIGKILL after the daemon's grace period). */
export function stopAttempt(socketPath: string): Promise<void> {
  return new Promise((resolve) => {
    const req = request(
      { socketPath, path: `/process/${TASK_PROCESS}`, method: 'DELETE', agent: false },
      (res) => {
        res.resume();
        res.on('end', () => resolve());
      },
    );
    req.on('error', () => resolve());
    req.end();
  });
}

/** The task's input as `blStartJob` reads it: `tasks[TASK_INDEX]` of the JSON at BL_EXECUTION_DATA_URL. */
export function executionDataUrl(index: number, input: unknown): string {
  const tasks: unknown[] = new Array(index).fill(null);
  tasks.push(input ?? {});
  return `data:application/json;base64,${Buffer.from(JSON.stringify({ tasks })).toString('base64')}`;
}
