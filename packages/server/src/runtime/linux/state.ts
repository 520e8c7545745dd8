// The per-sandbox record `<dataDir>/sandboxes/<id>/state.json`: everything needed to find, adopt and
// tear down a sandbox after the server restarts. It never holds envs (they may be secrets), only a hash.
import type { InstanceOwner, SandboxEnd } from '../driver.js';
import type { EgressPolicy } from '../egress/policy.js';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface SandboxRecord {
  id: string;
  slot: number;
  /** Kernel-visible name: cgroup directory, netns `berth-<name>`. */
  name: string;
  /** Host pid of bubblewrap; 0 while the sandbox is being created. */
  pid: number;
  /** Start time of `pid` in clock ticks since boot, so a recycled pid is not mistaken for ours. */
  pidStart: number;
  hostUid: number;
  address: string;
  hostAddress: string;
  specHash: string;
  image: string;
  /** The workspace the sandbox belongs to, as its owner said (which images a workspace has in use). */
  workspace?: string;
  /** The object it runs for (driver.ts InstanceOwner); absent in records written before owners were. */
  owner?: InstanceOwner;
  /** Host path of the image root the sandbox runs on (runtime/images); absent for the host userland. */
  rootfs?: string;
  socketPath: string;
  createdAt: string;
  /** The egress policy in force (domains only), applied again when a restarted server adopts the sandbox. */
  egress?: EgressPolicy;
  /**
   * The spec's volumes are not all mounted yet (they are mounted into the running sandbox, linux-driver.ts): a
   * restarted server that finds this replaces the sandbox rather than adopt it without its mounts.
   */
  mountsPending?: boolean;
  /**
   * Launched, but its daemon's socket is not linked where the server reaches it yet (create.ts waitForSocket): a
   * server killed in between leaves a live sandbox no request can reach, which a restarted one replaces.
   */
  socketPending?: boolean;
  /**
   * How a dead sandbox ended (its cgroup's counters), written by the host sweep (host-sweep.ts) before it removed
   * the cgroup of a sandbox that died while no server ran: its restarted server still reports it (out of memory).
   */
  ended?: SandboxEnd;
}

export const stateFile = (sandboxDir: string) => join(sandboxDir, 'state.json');

export function readRecord(sandboxDir: string): SandboxRecord | undefined {
  try {
    return JSON.parse(readFileSync(stateFile(sandboxDir), 'utf8')) as SandboxRecord;
  } catch {
    return undefined;
  }
}

/** Written by rename so a crash never leaves half a file. */
export function writeRecord(sandboxDir: string, rec: SandboxRecord): void {
  const tmp = `${stateFile(sandboxDir)}.tmp`;
  writeFileSync(tmp, recordText(rec), { mode: 0o600 });
  renameSync(tmp, stateFile(sandboxDir));
}

let tmpSeq = 0;

/**
 * The same through the thread pool, for a sandbox's start and assignment (decision 078): the data dir's disk may
 * make a write or rename wait. Its own temporary name, so that it never renames another writer's half-written file.
 */
export async function writeRecordAsync(sandboxDir: string, rec: SandboxRecord): Promise<void> {
  const tmp = `${stateFile(sandboxDir)}.${process.pid}.${tmpSeq++}.tmp`;
  await writeFile(tmp, recordText(rec), { mode: 0o600 });
  await rename(tmp, stateFile(sandboxDir));
}

const recordText = (rec: SandboxRecord) => `${JSON.stringify(rec, null, 2)}\n`;

/** Field 22 of /proc/<pid>/stat; undefined when the process does not exist. */
export function processStartTime(pid: number): number | undefined {
  if (!(pid > 0)) return undefined;
  try {
    return startTimeOf(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

/** The same through the thread pool: for polls on a start's path (launch.ts waitForSocket), off the event loop. */
export async function processStartTimeAsync(pid: number): Promise<number | undefined> {
  if (!(pid > 0)) return undefined;
  try {
    return startTimeOf(await readFile(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

function startTimeOf(stat: string): number | undefined {
  // comm (field 2) may hold spaces and parentheses: split after its last ')'.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  if (rest[0] === 'Z' || rest[0] === 'X') return undefined; // exited, waiting to be reaped
  return Number(rest[19]);
}

export function isProcessAlive(pid: number, startTime: number): boolean {
  return processStartTime(pid) === startTime;
}
