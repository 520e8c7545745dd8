// The end of every object with status: DELETING -> TERMINATED -> record removed. The DELETE verb only
// marks DELETING; this finishes the job, so a server that stops half-way finishes it at the next start.
import { keyOf, type StoredObject } from '../store/store.js';
import { type ControllerDeps, transition } from './events.js';

export const isDeleting = (o: StoredObject) => o.body.status === 'DELETING' || o.body.status === 'TERMINATED';

/**
 * Call once the runtime holds nothing of `o` any more. Writes TERMINATED (with its event), then removes
 * the record at the version just written; a concurrent write makes the delete throw and the queue retries.
 */
export async function finishDeletion(deps: ControllerDeps, o: StoredObject): Promise<void> {
  const terminated = await transition(deps, o, 'TERMINATED', 'terminated: nothing left to release');
  if (!terminated) return;
  await deps.resources.store.write([
    { op: 'delete', key: keyOf(terminated), expectVersion: terminated.resourceVersion },
  ]);
}
