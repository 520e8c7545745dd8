// Waiting for what a write leads to, through the server's watch of the object (`?watch=true`), never by polling: each
// status it passes through is shown as a phase, and the wait ends when the object settles — DEPLOYED, FAILED,
// DEACTIVATED, removed, or waiting for something only the user can give (code to build). A command then exits by
// that outcome, FAILED with the reason the object's last event gives.
import type { KindInfo } from '@berth/sdk';
import { itemPath, watch } from './client.js';
import { addressOf, reasonOf } from './columns.js';
import type { CliConfig } from './config.js';
import type { Progress } from './progress.js';
import { elapsed } from './style.js';

/** Statuses an object leaves by itself; any other is where a wait ends. */
const MOVING = new Set(['UPLOADING', 'BUILDING', 'BUILT', 'DEPLOYING', 'DEACTIVATING', 'DELETING']);

/** What each status means while it lasts, said as a phase. */
const PHASE: Record<string, string> = {
  UPLOADING: 'waiting for code',
  BUILDING: 'building',
  BUILT: 'built',
  DEPLOYING: 'deploying',
  DEACTIVATING: 'deactivating',
  DELETING: 'deleting',
};

export interface Outcome {
  /** The object as it settled (as it was last seen when it was removed). */
  object: any;
  /** DEPLOYED, FAILED, DEACTIVATED, TERMINATED, UPLOADING (waits for code), or REMOVED. */
  status: string;
  failed: boolean;
  /** The reason its last event gives. */
  reason?: string;
}

export class WaitTimeout extends Error {}

/**
 * Whether `o` has settled. UPLOADING settles a wait when the object has no code yet: it waits for the user, not for
 * the server (`berth deploy` waits past it itself, its upload being under way).
 */
export const settled = (o: any) => !MOVING.has(o?.status) || (o?.status === 'UPLOADING' && !o?.source);

/** A phase label for a status: what it means for this kind (an agent's DEPLOYING starts its replicas). */
export function phaseOf(kind: string, status: string): string {
  if (status === 'DEPLOYING' && (kind === 'Agent' || kind === 'Function')) return 'starting replicas';
  if (status === 'DEPLOYING' && kind === 'Sandbox') return 'starting';
  return PHASE[status] ?? status.toLowerCase();
}

/**
 * Watches `kd`'s object at `coll`/`name` until it settles (or `until` says so of an object), reporting each status as
 * a phase; throws WaitTimeout after `ms`.
 */
export async function waitFor(
  cfg: CliConfig,
  kd: KindInfo,
  coll: string,
  name: string,
  progress: Progress,
  ms: number,
  until: (o: any) => boolean = settled,
): Promise<Outcome> {
  const ctl = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ctl.abort();
  }, ms);
  let last: any;
  try {
    for await (const e of watch(cfg, itemPath(coll, name), {}, ctl.signal)) {
      if (e.type === 'SYNCED') continue;
      last = e.object;
      if (e.type === 'DELETED') return { object: last, status: 'REMOVED', failed: false };
      const status: string = last?.status ?? '';
      if (until(last)) {
        progress.end(status === 'FAILED');
        return { object: last, status, failed: status === 'FAILED', reason: reasonOf(last) };
      }
      if (status) progress.phase(phaseOf(kd.kind, status));
    }
  } finally {
    clearTimeout(timer);
    ctl.abort();
  }
  const follow = `follow it with \`berth describe ${kd.kind.toLowerCase()} ${name} --watch\``;
  if (timedOut) throw new WaitTimeout(`still ${last?.status ?? 'pending'} after ${elapsed(ms)}: ${follow}`);
  // The stream ended without the object's removal: the server went away (a restart) while it was on its way.
  throw new Error(
    `the server closed the watch while ${last?.status ?? 'pending'} (did it restart?): ${follow}`,
  );
}

/** The line a command ends with once its object settled, and the exit status it calls for. */
export function outcomeLine(kd: KindInfo, o: Outcome): { line: string; exitCode: number } {
  const label = `${kd.kind.toLowerCase()}/${o.object?.metadata?.name}`;
  switch (o.status) {
    case 'FAILED':
      return { line: `${label} FAILED: ${o.reason ?? 'no reason was recorded'}`, exitCode: 1 };
    case 'DEPLOYED': {
      const at = addressOf(o.object, kd.kind);
      return { line: `${label} ready${at ? ` at ${at}` : ''}`, exitCode: 0 };
    }
    case 'UPLOADING':
      return {
        line: `${label} waits for its code: \`berth deploy\` uploads and builds it`,
        exitCode: 0,
      };
    case 'REMOVED':
      return { line: `${label} was deleted meanwhile`, exitCode: 1 };
    default:
      return { line: `${label} ${o.status}${o.reason ? `: ${o.reason}` : ''}`, exitCode: 0 };
  }
}
