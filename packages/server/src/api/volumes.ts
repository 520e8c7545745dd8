// POST /v0/volumes and /v0/drives answer once the volume's image is made (DEPLOYED, or FAILED saying why), bounded
// like a sandbox's create: the service's SDK mounts a drive it just created at once (decision 047). A TERMINATED
// record left by a deletion a server stopped half-way is replaced instead of answering 409.
import { capacityRefusal, spaceHolders, type VolumeCapacity } from '../controllers/volume-capacity.js';
import { ApiError } from '../errors.js';
import { DEFAULT_VOLUME_SIZE_MB } from '../kinds/volume.js';
import type { Resources } from '../store/resources.js';
import type { WriteResult } from '../store/resources.js';
import { keyOf, StoreError } from '../store/store.js';
import { CREATE_WAIT_MS } from './sandboxes.js';
import { waitUntil } from './wait.js';
import type { CreateHook } from './crud.js';

export function volumeCreateHook(
  deps: { resources: Resources; capacity?: VolumeCapacity; waitMs?: number },
  kind: 'Volume' | 'Drive' = 'Volume',
): CreateHook {
  const waitMs = deps.waitMs ?? CREATE_WAIT_MS;
  const { resources, capacity } = deps;
  const kd = resources.kind(kind);
  const made = async (create: () => Promise<WriteResult>) => {
    const r = await create();
    const w = await waitUntil(
      resources.store,
      keyOf(r.object),
      waitMs,
      (o) => o?.body.status !== 'DEPLOYING',
    );
    return { object: w.object ?? r.object, dropped: r.dropped };
  };
  return async (req, _reply, create) => {
    if (capacity && req.access)
      await refuseOverCapacity(resources, capacity, kind, req.access.workspace, req.body);
    try {
      return await made(create);
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
      return made(create);
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
