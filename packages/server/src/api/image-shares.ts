// Sharing an image with another workspace (decision 051), in the service's shape: an admin of the source shares a name
// (a tagless one: `:latest` when held, else every tag), which stays pending until an admin of the target accepts it
// (the names are then bound in the target's own table, charged to its image quota; a name the target holds for
// another image is a 409 unless `force=true`) or declines it; the source may revoke it, pending or accepted. Only the
// source and the target of a share ever see it: any other workspace is answered 404, as for anything not its own.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { requireRole } from '../auth/require-role.js';
import { ApiError, invalid } from '../errors.js';
import { NAME_PATTERN } from '../kinds/common.js';
import type { ImageStore } from '../runtime/images/image-store.js';
import type { ShareRecord } from '../runtime/images/shares.js';
import { copiesOf, imageApiError, type SecondCopy } from './images.js';
import { imageView } from './image-view.js';

export interface ImageSharesDeps {
  images: ImageStore;
  workspaceExists: (name: string) => Promise<boolean>;
  /** In a cluster: an accepted share is answered once another node binds its names too (decision 087). */
  secondCopy?: SecondCopy;
}

const WORKSPACE = new RegExp(NAME_PATTERN);

const parts = (name: string) => {
  const [first, ...rest] = name.split('/');
  return rest.length ? { resourceType: first, imageName: rest.join('/') } : { imageName: name };
};

function pendingView(r: ShareRecord, hasConflict?: boolean) {
  return {
    id: r.id,
    ...parts(r.imageName),
    sourceWorkspace: r.source,
    targetWorkspace: r.target,
    sharedBy: r.sharedBy,
    createdAt: r.createdAt,
    expiresAt: r.expiresAt,
    ...(hasConflict === undefined ? {} : { hasConflict }),
  };
}

export function register(v0: FastifyInstance, deps: ImageSharesDeps) {
  const { images } = deps;
  const guard = <T>(fn: () => T): T => {
    try {
      return fn();
    } catch (e) {
      throw imageApiError(e);
    }
  };
  const nameOf = (req: FastifyRequest) => {
    const p = req.params as Record<string, string>;
    return `${p.resourceType}/${p.imageName}`;
  };
  const sharesOf = (source: string, name: string) =>
    images.shares.of(source).filter((s) => s.source === source && s.imageName === name);

  v0.post('/images/:resourceType/:imageName/share', async (req, reply) => {
    const a = requireRole(req, 'admin');
    const name = nameOf(req);
    const target = (req.body as { targetWorkspace?: unknown } | undefined)?.targetWorkspace;
    if (typeof target !== 'string' || !WORKSPACE.test(target))
      throw invalid([
        { pointer: '/targetWorkspace', message: 'the name of the workspace to share the image with' },
      ]);
    if (target === a.workspace)
      throw invalid([{ pointer: '/targetWorkspace', message: 'an image is shared with another workspace' }]);
    const names = guard(() => images.namesFor(a.workspace, name));
    if (!names.length) throw new ApiError('NOT_FOUND', `image ${name} not found`);
    if (!(await deps.workspaceExists(target)))
      throw invalid([{ pointer: '/targetWorkspace', message: `there is no workspace ${target}` }]);
    const held = images.find(a.workspace, names[0]);
    const references = Object.fromEntries(
      names.map((n) => [n, (images.find(a.workspace, n)?.id ?? '').slice(7)] as const),
    );
    const existing = sharesOf(a.workspace, name).find((s) => s.target === target && s.status === 'pending');
    if (existing) images.shares.remove(existing.id); // shared again: the new one says what the names stand for now
    const rec = images.shares.create({
      source: a.workspace,
      target,
      imageName: name,
      references,
      sharedBy: a.principal.subject,
    });
    reply.code(202);
    return { ...pendingView(rec), ...(held ? { image: held.id } : {}) };
  });

  v0.get('/images/:resourceType/:imageName/share', async (req) => {
    const a = requireRole(req, 'viewer');
    const name = nameOf(req);
    if (!guard(() => images.namesFor(a.workspace, name)).length && !sharesOf(a.workspace, name).length)
      throw new ApiError('NOT_FOUND', `image ${name} not found`);
    return sharesOf(a.workspace, name).map((s) => ({
      workspace: s.target,
      status: s.status,
      accountId: '',
      ...(s.status === 'pending' ? { pendingShareId: s.id } : {}),
    }));
  });

  v0.delete('/images/:resourceType/:imageName/share/:targetWorkspace', async (req) => {
    const a = requireRole(req, 'admin');
    const name = nameOf(req);
    const target = (req.params as Record<string, string>).targetWorkspace;
    const found = sharesOf(a.workspace, name).filter((s) => s.target === target);
    if (!found.length) throw new ApiError('NOT_FOUND', `image ${name} is not shared with ${target}`);
    for (const s of found) {
      if (s.status === 'active') guard(() => images.unbindShared(s.target, s));
      images.shares.remove(s.id);
    }
    const mine = guard(() => images.namesFor(a.workspace, name));
    const img = mine.length ? images.find(a.workspace, mine[0]) : undefined;
    return img
      ? imageView(images, a.workspace, img)
      : { metadata: { name, workspace: a.workspace }, spec: { tags: [] }, revoked: found.length };
  });

  v0.get('/pending-image-shares', async (req) => {
    const a = requireRole(req, 'viewer');
    const direction = (req.query as Record<string, string | undefined>).direction ?? 'incoming';
    if (direction !== 'incoming' && direction !== 'outgoing')
      throw invalid([{ pointer: '/direction', message: 'incoming or outgoing' }]);
    return images.shares
      .of(a.workspace)
      .filter(
        (s) => s.status === 'pending' && (direction === 'incoming' ? s.target : s.source) === a.workspace,
      )
      .map((s) =>
        pendingView(
          s,
          direction === 'incoming'
            ? Object.entries(s.references).some(([k, id]) => {
                const own = images.find(a.workspace, k);
                return own !== undefined && own.id !== `sha256:${id}`;
              })
            : undefined,
        ),
      );
  });

  /** A pending share addressed to the caller's workspace; anything else is not found (never another's). */
  function incoming(req: FastifyRequest) {
    const a = requireRole(req, 'admin');
    const id = (req.params as Record<string, string>).pendingShareId;
    const s = images.shares.get(id);
    if (!s || s.target !== a.workspace || s.status !== 'pending' || Date.parse(s.expiresAt) < Date.now())
      throw new ApiError('NOT_FOUND', `pending image share ${id} not found`);
    return { a, s };
  }

  v0.post('/pending-image-shares/:pendingShareId/accept', async (req, reply) => {
    const { a, s } = incoming(req);
    const force = (req.query as Record<string, string | undefined>).force === 'true';
    const bound = guard(() => images.bindNames(a.workspace, s.references, force));
    images.shares.save({ ...s, status: 'active', acceptedAt: new Date().toISOString() });
    await copiesOf(reply, deps.secondCopy, a.workspace, Object.keys(s.references));
    return imageView(images, a.workspace, bound[0]);
  });

  v0.post('/pending-image-shares/:pendingShareId/decline', async (req, reply) => {
    const { s } = incoming(req);
    images.shares.remove(s.id);
    images.collect();
    reply.code(204);
    return null;
  });
}
