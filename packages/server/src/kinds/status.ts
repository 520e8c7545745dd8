// The status values every kind with status moves through (DESIGN.md §4), and the one test for "being deleted".
// Kept here, below the store, so the store, the controllers, auth, the API and the gateway share one spelling.

/** Build steps (agents, functions), the deployment steps every kind shares, and the two ways an object ends. */
export const STATUSES = [
  'UPLOADING',
  'BUILDING',
  'BUILT',
  'DEPLOYING',
  'DEPLOYED',
  'FAILED',
  'DEACTIVATING',
  'DEACTIVATED',
  'DELETING',
  'TERMINATED',
  // A sandbox's archive (decision 053): its files kept as a snapshot layer, its instance gone, until unarchived.
  'ARCHIVING',
  'ARCHIVED',
  'UNARCHIVING',
] as const;

export type Status = (typeof STATUSES)[number];

/** Anything that carries a status: a status itself, an object's body, or a stored object (status in its body). */
export type HasStatus = string | undefined | { status?: unknown } | { body?: { status?: unknown } };

function statusOf(x: HasStatus): unknown {
  if (x === undefined || typeof x === 'string') return x;
  return 'body' in x ? x.body?.status : (x as { status?: unknown }).status;
}

/**
 * DELETING or TERMINATED: a DELETE was accepted, so the object no longer serves, accepts no new spec and
 * only moves on to TERMINATED and removal.
 */
export function isGone(x: HasStatus): boolean {
  const s = statusOf(x);
  return s === 'DELETING' || s === 'TERMINATED';
}
