// Per-workspace quotas (docs/decisions/040-workspace-quotas.md): what counts against each, and the refusals that
// name the quota, its limit, the current use and what to do. Pure: the ledger (quota-ledger.ts) holds what runs,
// the admission (quota-admission.ts) judges writes, and api/quotas.ts shows the view.
import { QUOTA_SETTINGS, type QuotaLimits } from '../../config.js';
import { ApiError, type FieldIssue } from '../../errors.js';
import { SANDBOX_MEMORY_MB } from '../../kinds/sandbox.js';

export type QuotaName = keyof QuotaLimits;

/** What runs for a workspace apart from its sandboxes: each a lease in the ledger. */
export type Consumer = 'replicas' | 'builds' | 'jobTasks';

/** What a workspace holds against its quotas: counts, and memory by what holds it. */
export interface Usage {
  sandboxes: number;
  replicas: number;
  builds: number;
  jobTasks: number;
  memoryMb: { sandboxes: number; replicas: number; builds: number; jobTasks: number };
}

export const emptyUsage = (): Usage => ({
  sandboxes: 0,
  replicas: 0,
  builds: 0,
  jobTasks: 0,
  memoryMb: { sandboxes: 0, replicas: 0, builds: 0, jobTasks: 0 },
});

export const memoryInUse = (u: Usage) =>
  u.memoryMb.sandboxes + u.memoryMb.replicas + u.memoryMb.builds + u.memoryMb.jobTasks;

/**
 * The memory a Sandbox object holds against its workspace's quotas, or undefined when it holds none: from its
 * create until it is TERMINATED, whatever its status (a deactivated or failed sandbox starts again on a PUT, which
 * is not judged again), its `runtime.memory`. Its writable layer is capped at the same size, so this bounds disk too.
 */
export function sandboxMemoryMb(body: { status?: unknown; spec?: any } | undefined): number | undefined {
  if (!body || body.status === 'TERMINATED') return undefined;
  return body.spec?.runtime?.memory ?? SANDBOX_MEMORY_MB;
}

/** Count and memory of the sandboxes among `objects` that hold quota. */
export function sandboxUse(objects: { body: any }[]): { count: number; memoryMb: number } {
  let count = 0;
  let memoryMb = 0;
  for (const o of objects) {
    const m = sandboxMemoryMb(o.body);
    if (m === undefined) continue;
    count++;
    memoryMb += m;
  }
  return { count, memoryMb };
}

/** `u` with its sandboxes counted from `objects` (those that hold quota), replacing what it said of them. */
export function withSandboxUse(u: Usage, objects: { body: any }[]): Usage {
  const s = sandboxUse(objects);
  u.sandboxes = s.count;
  u.memoryMb.sandboxes = s.memoryMb;
  return u;
}

/** Why something does not fit: which quota, its limit, what is in use, and a sentence saying all that. */
export interface Refusal {
  quota: QuotaName;
  limit: number;
  used: number;
  message: string;
}

const ask = (quota: QuotaName) => `ask the server's operator to raise ${QUOTA_SETTINGS[quota]}`;

/** What holds the workspace's memory, e.g. `sandboxes 3072 MB, replicas 2048 MB`. */
function memoryHolders(u: Usage): string {
  const parts = (
    [
      ['sandboxes', u.memoryMb.sandboxes],
      ['replicas', u.memoryMb.replicas],
      ['builds', u.memoryMb.builds],
      ['job tasks', u.memoryMb.jobTasks],
    ] as const
  ).filter(([, mb]) => mb > 0);
  return parts.length ? ` (${parts.map(([n, mb]) => `${n} ${mb} MB`).join(', ')})` : '';
}

const COUNTED: Record<Exclude<QuotaName, 'memoryMb'>, string> = {
  sandboxes: 'sandboxes (each counts until it is TERMINATED)',
  replicas: 'agent and function replicas running',
  builds: 'builds running',
  jobTasks: 'job tasks running',
};

/**
 * Whether `add` more of `quota` (one object; `askMb` of memory) fits beside `use` under `limits`; the refusal
 * names the first quota it would pass. `fix` says what the workspace itself can do (before asking the operator).
 */
export function judge(
  workspace: string,
  limits: QuotaLimits,
  use: Usage,
  what: { quota: Exclude<QuotaName, 'memoryMb'>; askMb: number; noun: string; fix: string },
): Refusal | undefined {
  const ws = JSON.stringify(workspace);
  const count = use[what.quota];
  if (count + 1 > limits[what.quota])
    return {
      quota: what.quota,
      limit: limits[what.quota],
      used: count,
      message: `workspace ${ws} is at its ${what.quota} quota: ${count} of ${limits[what.quota]} ${COUNTED[what.quota]}. ${what.fix}, or ${ask(what.quota)}`,
    };
  const used = memoryInUse(use);
  if (used + what.askMb > limits.memoryMb)
    return {
      quota: 'memoryMb',
      limit: limits.memoryMb,
      used,
      message: `workspace ${ws} is at its memory quota: ${used} MB of ${limits.memoryMb} MB in use${memoryHolders(use)}, and ${what.noun} asks for ${what.askMb} MB. ${what.fix}, or ${ask('memoryMb')}`,
    };
  return undefined;
}

/** A synchronous refusal: 429 QUOTA_EXCEEDED (DESIGN.md §4), pointing at the fields when the spec is the cause. */
export const quotaExceeded = (r: Pick<Refusal, 'message'>, errors?: FieldIssue[]) =>
  new ApiError('QUOTA_EXCEEDED', r.message, errors?.length ? { errors } : {});

/**
 * Why an agent's or function's spec can never run under the limits (its minScale replicas, or one replica, do not
 * fit however empty the workspace is), or undefined. maxScale is a ceiling, not a demand: it is capped at run time.
 */
export function scaledSpecRefusal(
  workspace: string,
  limits: QuotaLimits,
  kind: string,
  runtime: { memory?: number; minScale?: number } | undefined,
): { message: string; errors: FieldIssue[] } | undefined {
  const memory = runtime?.memory ?? 0;
  const min = runtime?.minScale ?? 0;
  const ws = JSON.stringify(workspace);
  const what = kind.toLowerCase();
  if (memory > limits.memoryMb)
    return {
      message: `a replica of this ${what} asks for ${memory} MB, more than workspace ${ws}'s memory quota (${limits.memoryMb} MB) lets anything run: ask for less (spec.runtime.memory), or ${ask('memoryMb')}`,
      errors: [
        { pointer: '/spec/runtime/memory', message: `exceeds the memory quota (${limits.memoryMb} MB)` },
      ],
    };
  if (min > limits.replicas)
    return {
      message: `runtime.minScale ${min} asks for more replicas than workspace ${ws}'s replicas quota (${limits.replicas}) lets run: lower it, or ${ask('replicas')}`,
      errors: [
        { pointer: '/spec/runtime/minScale', message: `exceeds the replicas quota (${limits.replicas})` },
      ],
    };
  if (min * memory > limits.memoryMb)
    return {
      message: `runtime.minScale ${min} × ${memory} MB is ${min * memory} MB, more than workspace ${ws}'s memory quota (${limits.memoryMb} MB) lets run: lower minScale or memory, or ${ask('memoryMb')}`,
      errors: [
        {
          pointer: '/spec/runtime/minScale',
          message: `minScale × memory exceeds the memory quota (${limits.memoryMb} MB)`,
        },
      ],
    };
  return undefined;
}

/** Why one job task of `memoryMb` can never run under the limits, or undefined. */
export function taskMemoryRefusal(workspace: string, limits: QuotaLimits, memoryMb: number, field: string) {
  if (memoryMb <= limits.memoryMb) return undefined;
  return {
    message: `a task of this job asks for ${memoryMb} MB, more than workspace ${JSON.stringify(workspace)}'s memory quota (${limits.memoryMb} MB) lets anything run: ask for less (${field}), or ${ask('memoryMb')}`,
  };
}

/**
 * The replicas the limits let one workload run at most (the replicas quota, and how many of its replicas the
 * memory quota holds), when that is below its maxScale: said once in its deploy event, so a maxScale the quotas
 * cap is never accepted silently.
 */
export function scaleNote(limits: QuotaLimits, maxScale: number, memoryMb: number): string {
  const byMemory = Math.floor(limits.memoryMb / Math.max(1, memoryMb));
  const most = Math.min(limits.replicas, byMemory);
  if (maxScale <= most) return '';
  const why =
    most === limits.replicas
      ? `the workspace's replicas quota (${limits.replicas})`
      : `the workspace's memory quota (${limits.memoryMb} MB: ${byMemory} replicas of ${memoryMb} MB)`;
  return `; runtime.maxScale ${maxScale} is capped at ${most} by ${why}, less what else the workspace runs`;
}
