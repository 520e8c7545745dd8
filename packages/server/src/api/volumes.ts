// POST /v0/volumes: a volume deleted a moment ago keeps its TERMINATED record for a while (its data is already
// gone, controllers/volume/volume.ts), and a new volume of that name replaces the record instead of answering 409.
import { capacityRefusal, spaceHolders, type VolumeCapacity } from '../controllers/volume/volume-capacity.js';
import { ApiError } from '../errors.js';
import { DEFAULT_VOLUME_SIZE_MB } from '../kinds/volume.js';
import type { Resources } from '../store/resources.js';
import { StoreError } from '../store/store.js';
import type { CreateHook } from './crud.js';

export function volumeCreateHook(
  deps: { resources: Resources; capacity?: VolumeCapacity },
  kind: 'Volume' | 'Drive' = 'Volume',
): CreateHook {
  const { resources, capacity } = deps;
  const kd = resources.kind(kind);
  return async (req, _reply, create) => {
    if (capacity && req.access)
      await refuseOverCapacity(resources, capacity, kind, req.access.workspace, req.body);
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

/**
 * A volume that cannot fit is refused at once with 429 QUOTA_EXCEEDED saying how full the space is. The volume
 * controller judges again, one volume at a time, when it makes the image: that is what decides a race.
 */
async function refuseOverCapacity(
  resources: Resources,
  capacity: VolumeCapacity,
  kind: string,
  workspace: string,
  body: unknown,
) {
  const b = body as { metadata?: { name?: unknown }; spec?: { size?: unknown } } | undefined;
  const name = typeof b?.metadata?.name === 'string' ? b.metadata.name : '';
  const sizeMb = typeof b?.spec?.size === 'number' ? b.spec.size : DEFAULT_VOLUME_SIZE_MB;
  const all = await spaceHolders(resources.store);
  const refusal = capacityRefusal(capacity, all, { kind, workspace, name, sizeMb });
  if (refusal) throw new ApiError('QUOTA_EXCEEDED', refusal);
}
