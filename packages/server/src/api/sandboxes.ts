// POST /v0/sandboxes (and a PUT of a new spec) answers once the sandbox runs, because the service's SDK uses the answer at once
// (docs/compat.md): it waits on the store watch for the object to be DEPLOYED, bounded; past the bound it
// answers 504 with the object as it is, and the SDK polls GET. `?createIfNotExist=true` answers the
// existing sandbox instead of a 409; a TERMINATED record kept for retention never blocks a new create.
import type { FastifyRequest } from 'fastify';
import type { Resources } from '../store/resources.js';
import {
  keyOf,
  keyString,
  type ResourceKey,
  StoreError,
  type Store,
  type StoredObject,
} from '../store/store.js';
import type { CreateHook } from './crud.js';
import { ApiError, invalid } from '../errors.js';
import { type ImageStore, isImageId } from '../runtime/images/image-store.js';

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
  const ks = keyString(key);
  let latest: StoredObject | undefined;
  /** A change seen by the watch is newer than anything the read below returns. */
  let seen = false;
  let wake!: () => void;
  const changed = new Promise<void>((r) => {
    wake = r;
  });
  // Subscribed before reading, so a change between the read and the wait is not missed.
  const unwatch = store.watch((c) => {
    if (keyString(c.object) !== ks) return;
    seen = true;
    latest = c.type === 'DELETED' ? undefined : c.object;
    if (c.type === 'DELETED' || !SETTLING.has(c.object.body.status)) wake();
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    const now = await store.get(key);
    if (!seen) latest = now;
    if (!latest || !SETTLING.has(latest.body.status)) return { object: latest, settled: true };
    const timedOut = new Promise<boolean>((r) => {
      timer = setTimeout(() => r(true), ms);
    });
    const out = await Promise.race([changed.then(() => false), timedOut]);
    return { object: latest, settled: !out };
  } finally {
    clearTimeout(timer);
    unwatch();
  }
}

const nameIn = (body: unknown): string | undefined => {
  const n = (body as { metadata?: { name?: unknown } } | undefined)?.metadata?.name;
  return typeof n === 'string' ? n : undefined;
};

export function sandboxCreateHook(deps: {
  resources: Resources;
  images?: ImageStore;
  waitMs?: number;
}): CreateHook {
  const { resources } = deps;
  const kd = resources.kind('Sandbox');
  return async (req: FastifyRequest, reply, create) => {
    const q = (req.query ?? {}) as Record<string, string>;
    const ifNotExist = q.createIfNotExist === 'true';
    const name = nameIn(req.body);
    let result: { object: StoredObject; dropped: string[] };
    if (name && req.access) await refuseHeldVolumes(resources, req.access.workspace, name, req.body);
    if (req.access) refuseUnheldImageId(deps.images, req.access.workspace, req.body);
    try {
      result = await create();
    } catch (e) {
      if (!(e instanceof StoreError && e.reason === 'exists') || !name || !req.access) throw e;
      const existing = await resources.get(kd, req.access.workspace, [], name);
      if (existing?.body.status === 'TERMINATED') {
        // Only kept to be read: a new sandbox of that name replaces the record (at the version read).
        await resources.removeRecord(existing).catch((err) => {
          if (!(err instanceof StoreError)) throw err;
        });
        result = await create();
      } else if (ifNotExist && existing) result = { object: existing, dropped: [] };
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
    return { object, dropped: result.dropped };
  };
}

/**
 * A PUT that moves the sandbox back to DEPLOYING (a new spec; new envs restart it) answers once it runs again,
 * as the service's update does, within the same bound as a create (then 504 with the object as it is).
 */
export function sandboxReplaceHook(deps: {
  resources: Resources;
  images?: ImageStore;
  waitMs?: number;
}): CreateHook {
  return async (req, reply, replace) => {
    if (req.access) refuseUnheldImageId(deps.images, req.access.workspace, req.body);
    const result = await replace();
    if (!SETTLING.has(result.object.body.status)) return result;
    const { object, settled } = await waitSettled(
      deps.resources.store,
      keyOf(result.object),
      deps.waitMs ?? CREATE_WAIT_MS,
    );
    if (!object) return result;
    if (!settled) reply.code(504);
    return { object, dropped: result.dropped };
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
function refuseUnheldImageId(images: ImageStore | undefined, workspace: string, body: unknown) {
  const image = (body as { spec?: { runtime?: { image?: unknown } } } | undefined)?.spec?.runtime?.image;
  if (typeof image !== 'string' || !isImageId(image) || images?.find(workspace, image)) return;
  throw invalid([
    { pointer: '/spec/runtime/image', message: `image ${image} is not among this workspace's images` },
  ]);
}
