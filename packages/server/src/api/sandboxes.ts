// POST /v0/sandboxes (and a PUT of a new spec) answers once the sandbox runs, because the service's SDK uses the answer at once
// (docs/compat.md): it waits on the store watch for the object to be DEPLOYED, bounded; past the bound it
// answers 504 with the object as it is, and the SDK polls GET. `?createIfNotExist=true` answers the
// existing sandbox instead of a 409; one that reads gone (deleted, or past its expiry) never blocks a new create.
import type { FastifyRequest } from 'fastify';
import type { Resources } from '../store/resources.js';
import { keyOf, type ResourceKey, StoreError, type Store, type StoredObject } from '../store/store.js';
import type { CreateHook } from './crud.js';
import { ApiError, invalid } from '../errors.js';
import { type ImageStore, isImageId } from '../runtime/images/image-store.js';
import { waitUntil } from './wait.js';
import { EXPIRY_ACTOR } from '../controllers/sandbox/sandbox-expiry.js';
import { isGone } from '../kinds/status.js';
import type { KindDescriptor } from '../kinds/types.js';

/**
 * How long a create waits for its sandbox to run. A start takes 0.1-0.3 s on a busy 2-core host; this bound is for
 * a loaded host, and stays under the minute after which proxies in front of Berth commonly give up.
 */
export const CREATE_WAIT_MS = 30_000;

/** Statuses a new sandbox moves out of by itself; anything else is what the create answers with. */
const SETTLING = new Set(['DEPLOYING']);

/** Resolves with the object once it is no longer settling, or with the latest seen once `ms` pass. */
export async function waitSettled(
  store: Store,
  key: ResourceKey,
  ms: number,
): Promise<{ object?: StoredObject; settled: boolean }> {
  const w = await waitUntil(store, key, ms, (o) => !o || !SETTLING.has(o.body.status));
  return { object: w.object, settled: w.met };
}

const nameIn = (body: unknown): string | undefined => {
  const n = (body as { metadata?: { name?: unknown } } | undefined)?.metadata?.name;
  return typeof n === 'string' ? n : undefined;
};

export function sandboxCreateHook(deps: {
  resources: Resources;
  images?: ImageStore;
  /** In a cluster, whether the workspace holds an image id where its images are (runtime/images/peer-images.ts). */
  holdsImage?: (workspace: string, id: string) => Promise<boolean>;
  waitMs?: number;
}): CreateHook {
  const { resources } = deps;
  const kd = resources.kind('Sandbox');
  return async (req: FastifyRequest, reply, create) => {
    const q = (req.query ?? {}) as Record<string, string>;
    const ifNotExist = q.createIfNotExist === 'true';
    const name = nameIn(req.body);
    let result: { object: StoredObject; dropped: string[]; created: boolean };
    if (name && req.access) await refuseHeldVolumes(resources, req.access.workspace, name, req.body);
    if (req.access) await refuseUnheldImageId(deps, req.access.workspace, req.body);
    try {
      result = await create();
    } catch (e) {
      if (!(e instanceof StoreError && e.reason === 'exists') || !name || !req.access) throw e;
      const existing = await resources.get(kd, req.access.workspace, [], name);
      if (existing && isGone(resources.view(kd, existing))) {
        // Deleted, or past its expiry (it reads TERMINATED): the name is free. Its deletion is finished here (the
        // sweep would do it within seconds), then its record makes way for the new sandbox.
        await makeWay(resources, kd, existing, deps.waitMs ?? CREATE_WAIT_MS);
        result = await create();
      } else if (ifNotExist && existing) result = { object: existing, dropped: [], created: false };
      else throw e;
    }
    const { object, settled } = await waitSettled(
      resources.store,
      keyOf(result.object),
      deps.waitMs ?? CREATE_WAIT_MS,
    );
    if (!object)
      throw new ApiError(
        'NOT_FOUND',
        `sandbox ${JSON.stringify(result.object.name)} was deleted while it started`,
      );
    if (!settled) reply.code(504);
    return { object, dropped: result.dropped, created: result.created };
  };
}

/**
 * Finishes the deletion of a sandbox that reads gone (marking one past its expiry DELETING as the sweep would),
 * waits for it to be TERMINATED or removed, and removes the record at the version read. A create racing this one
 * for the name then wins, and this one answers 409.
 */
async function makeWay(resources: Resources, kd: KindDescriptor, existing: StoredObject, waitMs: number) {
  const ctx = { workspace: existing.workspace, parents: [], actor: EXPIRY_ACTOR };
  if (!isGone(existing)) await resources.delete(kd, ctx, existing.name);
  const w = await waitUntil(
    resources.store,
    keyOf(existing),
    waitMs,
    (o) => !o || o.body.status === 'TERMINATED',
  );
  if (!w.met)
    throw new ApiError('TIMEOUT', `sandbox ${JSON.stringify(existing.name)} is still being deleted`);
  if (w.object)
    await resources.removeRecord(w.object).catch((err) => {
      if (!(err instanceof StoreError)) throw err;
    });
}

/**
 * A PUT that moves the sandbox back to DEPLOYING (a new spec; new envs restart it) answers once it runs again,
 * as the service's update does, within the same bound as a create (then 504 with the object as it is).
 */
export function sandboxReplaceHook(deps: {
  resources: Resources;
  images?: ImageStore;
  /** In a cluster, whether the workspace holds an image id where its images are (runtime/images/peer-images.ts). */
  holdsImage?: (workspace: string, id: string) => Promise<boolean>;
  waitMs?: number;
}): CreateHook {
  return async (req, reply, replace) => {
    if (req.access) await refuseUnheldImageId(deps, req.access.workspace, req.body);
    const result = await replace();
    if (!SETTLING.has(result.object.body.status)) return result;
    const { object, settled } = await waitSettled(
      deps.resources.store,
      keyOf(result.object),
      deps.waitMs ?? CREATE_WAIT_MS,
    );
    if (!object) return result;
    if (!settled) reply.code(504);
    return { object, dropped: result.dropped, created: result.created };
  };
}

/**
 * A create naming a volume another holder has is a 409 that names the holder, answered at once. The controller's
 * claim (controllers/volume/volume-attach.ts, one transaction) is what decides a race; this only spares the common case a
 * sandbox that is FAILED a moment later.
 */
async function refuseHeldVolumes(resources: Resources, workspace: string, name: string, body: unknown) {
  const mounts = (body as { spec?: { volumes?: unknown } } | undefined)?.spec?.volumes;
  if (!Array.isArray(mounts)) return;
  const vk = resources.kind('Volume');
  for (const m of mounts) {
    if (typeof m?.name !== 'string') continue;
    const v = await resources.get(vk, workspace, [], m.name);
    const held = v?.body.state?.attachedTo;
    if (held && held !== `sandbox:${name}`)
      throw new ApiError('CONFLICT', `volume ${JSON.stringify(m.name)} is attached to ${held}`);
  }
}

/**
 * A spec naming its image by id names one of the workspace's own images, or is a 422 at once: an id resolves only
 * among the images the workspace holds (docs/decisions/037), and there is nothing to pull for it. The controller's
 * resolution is what decides (the image may be let go of meanwhile); this spares a sandbox that is FAILED a moment
 * later.
 */
async function refuseUnheldImageId(
  deps: { images?: ImageStore; holdsImage?: (workspace: string, id: string) => Promise<boolean> },
  workspace: string,
  body: unknown,
) {
  const image = (body as { spec?: { runtime?: { image?: unknown } } } | undefined)?.spec?.runtime?.image;
  if (typeof image !== 'string' || !isImageId(image)) return;
  // A holder that cannot be asked now lets the create through: the controller's resolution says why it cannot start.
  const held = deps.holdsImage
    ? await deps.holdsImage(workspace, image).catch(() => true)
    : deps.images?.find(workspace, image);
  if (held) return;
  throw invalid([
    { pointer: '/spec/runtime/image', message: `image ${image} is not among this workspace's images` },
  ]);
}
