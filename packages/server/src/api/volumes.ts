// POST /v0/volumes: a volume deleted a moment ago keeps its TERMINATED record for a while (its data is already
// gone, controllers/volume.ts), and a new volume of that name replaces the record instead of answering 409.
import type { Resources } from '../store/resources.js';
import { StoreError } from '../store/store.js';
import type { CreateHook } from './crud.js';

export function volumeCreateHook(deps: { resources: Resources }): CreateHook {
  const { resources } = deps;
  const kd = resources.kind('Volume');
  return async (req, _reply, create) => {
    try {
      return await create();
    } catch (e) {
      const name = (req.body as { metadata?: { name?: unknown } } | undefined)?.metadata?.name;
      if (!(e instanceof StoreError && e.reason === 'exists') || typeof name !== 'string' || !req.access)
        throw e;
      const existing = await resources.get(kd, req.access.workspace, [], name);
      if (existing?.body.status !== 'TERMINATED') throw e;
      // At the version read: a create racing this one makes it throw, and that one wins.
      await resources.removeRecord(existing).catch((err) => {
        if (!(err instanceof StoreError)) throw err;
      });
      return create();
    }
  };
}
