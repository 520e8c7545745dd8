// The status verbs: the one way status, events and the fields only the server writes (a sandbox's state and
// lastUsedAt, a volume's `state.attachedTo`, an egress IP's `spec.publicIp`) are written, by controllers, the gateway,
// the upload route and the DELETE verb alike. Each is a read-modify-write inside the store's transaction, so
// concurrent writers never conflict and no caller needs a retry loop (decision 004).
import { isoTime } from './iso-time.js';
import { isGone, type Status } from '../kinds/status.js';
import { type ResourceKey, type Store, StoreError, type StoredObject } from './store.js';

/** Events kept per object; older ones are dropped (the API is not an audit log). */
export const MAX_EVENTS = 50;

/** What `updateStatus` changes; see there. */
export interface StatusUpdate {
  /** The new status; the event (with `message`) is appended only when it differs from the current one. */
  to?: Status;
  message?: string;
  /**
   * Read-only fields beside status (e.g. a sandbox's `state`, `lastUsedAt`), or a function of the object as it is at
   * the write giving them; undefined deletes a field.
   */
  extras?: Record<string, unknown> | ((cur: StoredObject) => Record<string, unknown>);
  /**
   * Spec fields only the server writes, by JSON pointer under `spec` (each must be one of its kind's `readOnlySpec`,
   * which Resources checks): e.g. an egress IP's `/publicIp`.
   */
  spec?: Record<string, unknown>;
  /**
   * Judged on the object as it is at the write: false writes nothing (e.g. a DELETE landed meanwhile); an error
   * thrown ends the write with it (for `updateStatuses`, the whole transaction).
   */
  when?: (cur: StoredObject) => boolean;
}

/** `updateStatus` outcomes that write nothing. */
const SKIP = Symbol('skip');
const UNCHANGED = Symbol('unchanged');
/** Thrown out of a `mutate` to end its transaction without a write. */
class NothingToWrite extends Error {}

/**
 * The one status verb (controllers, the gateway's usage bookkeeping): moves the object to `to` (with
 * its event) and sets or, for an undefined value, deletes the `extras` fields. Read-modify-write inside the
 * store's transaction, so a concurrent writer never causes a conflict and no caller needs a retry loop.
 * Returns the written object; the object as it is when nothing would change (nothing is written, so no
 * watch fires); undefined when the object is gone or `when` is false for it as it is at the write.
 * An object being deleted moves only to TERMINATED: nothing reopens what a DELETE closed.
 */
export function updateStatus(
  store: Store,
  now: () => Date,
  key: ResourceKey,
  u: StatusUpdate,
): Promise<StoredObject | undefined> {
  return writeStatus(store, key, (cur) => nextBody(cur, u, now));
}

/**
 * `updateStatus` of several objects in one store transaction, all or none (a volume claim for every volume of a
 * spec): each judged on the object as it is at the write. Objects a first read shows nothing to change for are not
 * written; an error thrown by a `when` ends the transaction with it.
 */
export async function updateStatuses(
  store: Store,
  now: () => Date,
  updates: (StatusUpdate & { key: ResourceKey })[],
): Promise<void> {
  const seen = await Promise.all(updates.map((u) => store.get(u.key)));
  const due = updates.filter((u, i) => {
    const cur = seen[i];
    if (!cur) throw new StoreError('not_found', u.key);
    const next = nextBody(cur, u, now);
    return next !== SKIP && next !== UNCHANGED;
  });
  if (!due.length) return;
  await store.write(
    due.map((u) => ({
      op: 'update' as const,
      key: u.key,
      mutate: (cur: StoredObject) => {
        const next = nextBody(cur, u, now);
        return next === SKIP || next === UNCHANGED ? cur.body : next;
      },
    })),
  );
}

/** The body `u` makes of `cur`, or SKIP (`when` says no, or a DELETE is not to be reopened) or UNCHANGED. */
function nextBody(
  cur: StoredObject,
  u: StatusUpdate,
  now: () => Date,
): Record<string, any> | typeof SKIP | typeof UNCHANGED {
  if (u.when && !u.when(cur)) return SKIP;
  if (isGone(cur) && u.to !== undefined && u.to !== 'TERMINATED' && u.to !== cur.body.status) return SKIP;
  const body = structuredClone(cur.body);
  let changed = false;
  const extras = typeof u.extras === 'function' ? u.extras(cur) : (u.extras ?? {});
  for (const [k, v] of Object.entries(extras)) {
    if (JSON.stringify(body[k]) === JSON.stringify(v)) continue;
    if (v === undefined) delete body[k];
    else body[k] = v;
    changed = true;
  }
  for (const [pointer, v] of Object.entries(u.spec ?? {})) {
    const path = pointer.split('/').slice(1);
    body.spec ??= {};
    let at = body.spec;
    for (const k of path.slice(0, -1)) at = at[k] ??= {};
    const last = path[path.length - 1];
    if (JSON.stringify(at[last]) === JSON.stringify(v)) continue;
    if (v === undefined) delete at[last];
    else at[last] = v;
    changed = true;
  }
  if (u.to !== undefined && u.to !== body.status) {
    withEvent(body, u.to, u.message ?? '', now());
    changed = true;
  }
  return changed ? body : UNCHANGED;
}

/**
 * Appends an event (with `status`, the current one by default, which it also sets) unless the last event
 * already says the same: a fact such as "waiting for a runtime" is recorded once, not once per reconcile.
 * Returns what `updateStatus` returns.
 */
export function recordEvent(
  store: Store,
  now: () => Date,
  key: ResourceKey,
  message: string,
  status?: Status,
): Promise<StoredObject | undefined> {
  return writeStatus(store, key, (cur) => {
    const to = status ?? cur.body.status;
    const last = (cur.body.events ?? []).at(-1);
    if (last?.status === to && last?.message === message) return UNCHANGED;
    if (isGone(cur) && to !== cur.body.status && to !== 'TERMINATED') return SKIP;
    return withEvent(structuredClone(cur.body), to, message, now());
  });
}

/** Runs `next` on the stored object inside the write's transaction; SKIP and UNCHANGED write nothing. */
async function writeStatus(
  store: Store,
  key: ResourceKey,
  next: (cur: StoredObject) => Record<string, any> | typeof SKIP | typeof UNCHANGED,
): Promise<StoredObject | undefined> {
  // Judged on a read first: most calls change nothing, and those should not open a write transaction.
  const seen = await store.get(key);
  if (!seen) return undefined;
  const first = next(seen);
  if (first === SKIP) return undefined;
  if (first === UNCHANGED) return seen;
  let outcome: StoredObject | undefined;
  const mutate = (cur: StoredObject) => {
    const body = next(cur);
    if (body === SKIP || body === UNCHANGED) {
      outcome = body === SKIP ? undefined : cur;
      throw new NothingToWrite();
    }
    return body;
  };
  try {
    return (await store.write([{ op: 'update', key, mutate }]))[0];
  } catch (e) {
    if (e instanceof NothingToWrite) return outcome;
    if (e instanceof StoreError && e.reason === 'not_found') return undefined;
    throw e;
  }
}

/** Sets `status` and appends its event to `body` (in place), keeping the last MAX_EVENTS. */
export function withEvent(body: any, status: string, message: string, now: Date) {
  const revision = String(body.metadata?.generation ?? '');
  body.status = status;
  body.events = [
    ...(body.events ?? []),
    { type: 'deployment', status, message, revision, time: isoTime(now) },
  ].slice(-MAX_EVENTS);
  return body;
}
