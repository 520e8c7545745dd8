// Waiting on the store watch for an object to reach a state, bounded: how a create answers once its sandbox runs,
// and a DELETE once the deletion is done (decision 047), without polling.
import type { FastifyRequest } from 'fastify';
import type { Resources } from '../store/resources.js';
import { keyOf, keyString, type ResourceKey, type Store, type StoredObject } from '../store/store.js';

/**
 * How long a DELETE waits for its deletion to complete. Removing a sandbox or a volume's image takes well under a
 * second; the bound is for a loaded host, under the minute after which proxies in front of Berth give up.
 */
export const DELETE_WAIT_MS = 30_000;

export interface Waited {
  /** The object now; undefined once its record is removed. */
  object?: StoredObject;
  /** The last version seen, also after its record was removed. */
  last?: StoredObject;
  /** Whether `done` held before the bound. */
  met: boolean;
}

/** Resolves once `done` holds for the object (undefined: its record is gone), or with what is there after `ms`. */
export async function waitUntil(
  store: Store,
  key: ResourceKey,
  ms: number,
  done: (o: StoredObject | undefined) => boolean,
): Promise<Waited> {
  const ks = keyString(key);
  let object: StoredObject | undefined;
  let last: StoredObject | undefined;
  /** A change seen by the watch is newer than anything the read below returns. */
  let seen = false;
  let wake!: () => void;
  const woken = new Promise<void>((r) => {
    wake = r;
  });
  // Subscribed before reading, so a change between the read and the wait is not missed.
  const unwatch = store.watch((c) => {
    if (keyString(c.object) !== ks) return;
    seen = true;
    last = c.object;
    object = c.type === 'DELETED' ? undefined : c.object;
    if (done(object)) wake();
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    const now = await store.get(key);
    if (!seen) {
      object = now;
      last = now;
    }
    if (done(object)) return { object, last, met: true };
    const timedOut = new Promise<boolean>((r) => {
      timer = setTimeout(() => r(true), ms);
    });
    const out = await Promise.race([woken.then(() => false), timedOut]);
    return { object, last, met: !out };
  } finally {
    clearTimeout(timer);
    unwatch();
  }
}

/** Wraps a kind's DELETE: given the generic delete (it marks the object DELETING), answers what is to be shown. */
export type DeleteHook = (req: FastifyRequest, del: () => Promise<StoredObject>) => Promise<StoredObject>;

/**
 * A DELETE that answers once the deletion is done, as the service's SDK expects (it reads the object right after):
 * the record removed, or TERMINATED and `kept` (a sandbox keeping its record for a while). Past the bound it
 * answers the object as it is, still DELETING; the controller finishes the job.
 */
export function deleteWhenDone(
  resources: Resources,
  kept: (o: StoredObject) => boolean = () => false,
  waitMs = DELETE_WAIT_MS,
): DeleteHook {
  return async (_req, del) => {
    const marked = await del();
    const w = await waitUntil(
      resources.store,
      keyOf(marked),
      waitMs,
      (o) => !o || (o.body.status === 'TERMINATED' && kept(o)),
    );
    return w.last ?? marked;
  };
}
