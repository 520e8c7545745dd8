// Who takes an agent's or function's requests, in words, and where one revision stands: serving all of them, a
// canary's share, or none because `spec.revision.active` pins another (a deploy then adds a revision that waits at
// 0%) — with the command that changes it.
import { shortRevision } from './columns.js';

export type Share = 'all' | 'canary' | 'active' | 'none';

const canaryPercent = (o: any): number => (o?.canaryRevision ? (o?.spec?.revision?.canaryPercent ?? 0) : 0);

/** The share of `id` in `o`'s traffic. */
export function shareOf(o: any, id: string): Share {
  const pct = canaryPercent(o);
  if (id === o?.canaryRevision && pct > 0) return 'canary';
  if (id === o?.activeRevision) return pct > 0 ? 'active' : 'all';
  return 'none';
}

/** `berth promote agent <name> <rev>`: the command that gives a revision all of the traffic. */
export const promoteCommand = (kind: string, name: string, id: string) =>
  `berth promote ${kind.toLowerCase()} ${name} ${id}`;

/** One line on the traffic: who serves it, whether it is pinned, and a newer revision left at 0%. */
export function trafficNote(o: any, kind: string): string | undefined {
  const active: string | undefined = o?.activeRevision;
  if (!active) return undefined;
  const pct = canaryPercent(o);
  let s =
    pct > 0
      ? `${shortRevision(active)} takes ${100 - pct}%, canary ${shortRevision(o.canaryRevision)} ${pct}%`
      : `${shortRevision(active)} takes all`;
  if (o?.spec?.revision?.active) s += ' (pinned by spec.revision.active)';
  const newest: string | undefined = o?.revisions?.[0]?.id;
  if (newest && shareOf(o, newest) === 'none')
    s += `; the newest revision ${shortRevision(newest)} takes none: \`${promoteCommand(kind, o.metadata?.name, newest)}\``;
  return s;
}

/** The revision built from the source `digest` (the newest one, when the same source was built more than once). */
export const revisionOfSource = (o: any, digest: string): string | undefined =>
  (Array.isArray(o?.revisions) ? o.revisions : []).find((r: any) => r?.source === digest)?.id;
