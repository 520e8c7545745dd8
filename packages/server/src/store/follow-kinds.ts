// In-memory indexes kept from the store (placements, volume nodes): every object of some kinds listed once, then
// followed through the change feed.
import { EVERY_WORKSPACE, type Store, type StoredObject } from './store.js';

/**
 * Calls `set(key, object)` for every object of `kinds` as listed, and again as each change arrives (`undefined`:
 * deleted), keyed by `keyOf`. The feed is followed before the listing starts, and a key changed meanwhile is not
 * set from the listing (the change is newer than what the listing read). Resolves with the unsubscribe function.
 */
export async function followKinds(
  store: Store,
  kinds: readonly string[],
  keyOf: (o: StoredObject) => string,
  set: (key: string, o: StoredObject | undefined) => void,
): Promise<() => void> {
  const seen = new Set<string>();
  const unwatch = store.watch((c) => {
    if (!kinds.includes(c.object.kind)) return;
    const k = keyOf(c.object);
    seen.add(k);
    set(k, c.type === 'DELETED' ? undefined : c.object);
  });
  try {
    for (const kind of kinds)
      for (const o of await store.list({ workspace: EVERY_WORKSPACE, kind })) {
        const k = keyOf(o);
        if (!seen.has(k)) set(k, o);
      }
  } catch (err) {
    unwatch();
    throw err;
  }
  return unwatch;
}
