// Snapshots, restore, fork, archive and unarchive of sandboxes (decision 053), in the service's wire shape: the
// workspace's snapshots under /snapshots (by id; a list is `{data, meta}` from API version 2026-04-28), a sandbox's
// under /sandboxes/{name}/snapshots (a bare array, as the service's SDK maps it), /sandboxes/{name}/fork and
// /snapshots/{id}/fork, /sandboxes/{name}/archive|unarchive. Every lookup is in the caller's workspace: another
// workspace's sandbox or snapshot is a 404 like one that does not exist.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { requireRole } from '../auth/require-role.js';
import { type SnapshotRecord, type Snapshots, snapshotView } from '../controllers/sandbox/snapshots.js';
import { ApiError, invalid, notFound } from '../errors.js';
import { NAME_PATTERN } from '../kinds/common.js';
import { isDefaultImage } from '../kinds/image-reference.js';
import { isGone, type Status } from '../kinds/status.js';
import { imageFromLayers } from '../runtime/images/from-layers.js';
import type { ImageStore } from '../runtime/images/image-store.js';
import { imageView } from './image-view.js';
import { copiesOf, type SecondCopy } from './images.js';
import type { Resources } from '../store/resources.js';
import { keyOf } from '../store/store.js';
import { memoryPage } from './pagination.js';
import { CREATE_WAIT_MS, waitSettled } from './sandboxes.js';

export interface SnapshotRouteDeps {
  resources: Resources;
  snapshots: Snapshots;
  /** Where a snapshot promoted to an image goes (POST /snapshots/{id}/image). */
  images?: ImageStore;
  /** In a cluster: an image made from a snapshot is answered once another node holds it (decision 087). */
  secondCopy?: SecondCopy;
  waitMs?: number;
}

const NAME = new RegExp(NAME_PATTERN);
/** Fork fields the service has for applications only: a sandbox fork refuses them rather than ignore them. */
const APPLICATION_ONLY = ['port', 'traffic', 'customDomain', 'prefix'] as const;
const SORTS = ['createdAt:desc', 'createdAt:asc', 'name:asc', 'name:desc'];

export function register(v0: FastifyInstance, deps: SnapshotRouteDeps) {
  const { resources, snapshots } = deps;
  const sandboxKind = resources.kind('Sandbox');
  const params = (req: FastifyRequest) => req.params as Record<string, string>;

  async function views(workspace: string, records: SnapshotRecord[]) {
    const gone = await snapshots.sourcesGone(workspace);
    return records.map((r) => snapshotView(r, gone.has(r.source.name)));
  }
  const view = async (workspace: string, r: SnapshotRecord) => (await views(workspace, [r]))[0];

  v0.post('/snapshots', async (req) => {
    const a = requireRole(req, 'member');
    const body = (req.body ?? {}) as { name?: unknown; source?: { name?: unknown; kind?: unknown } };
    const source = body.source?.name;
    if (typeof source !== 'string' || !source)
      throw invalid([{ pointer: '/source/name', message: 'names the sandbox to capture' }]);
    if (body.source?.kind !== undefined && body.source.kind !== 'sandbox')
      throw invalid([{ pointer: '/source/kind', message: 'only sandboxes can be captured (kind sandbox)' }]);
    const r = await snapshots.create(
      a.workspace,
      source,
      body.name as string | undefined,
      a.principal.subject,
    );
    return view(a.workspace, r);
  });

  v0.get('/snapshots', async (req, reply) => {
    const a = requireRole(req, 'viewer');
    const q = (req.query ?? {}) as Record<string, string>;
    const sort = q.sort ?? 'createdAt:desc';
    if (!SORTS.includes(sort))
      throw invalid([{ pointer: '/query/sort', message: `one of ${SORTS.join(', ')}` }]);
    let all = await snapshots.list(a.workspace);
    if (q.q) all = all.filter((r) => r.name.includes(q.q) || r.source.name.includes(q.q));
    const [field, dir] = sort.split(':');
    const page = memoryPage(
      all,
      (r) => [field === 'name' ? r.name : r.createdAt, r.id],
      req,
      reply,
      dir === 'desc',
    );
    return views(a.workspace, page);
  });

  v0.get('/snapshots/:snapshotName', async (req) => {
    const a = requireRole(req, 'viewer');
    return view(a.workspace, await snapshots.get(a.workspace, params(req).snapshotName));
  });

  v0.delete('/snapshots/:snapshotName', async (req, reply) => {
    const a = requireRole(req, 'member');
    await snapshots.delete(a.workspace, params(req).snapshotName);
    reply.code(204);
  });

  v0.post('/snapshots/:snapshotName/fork', async (req, reply) => {
    const a = requireRole(req, 'member');
    const rec = await snapshots.get(a.workspace, params(req).snapshotName);
    return fork(req, reply, rec);
  });

  // A snapshot as an image of the workspace (the issue's "template from a running sandbox"): its layers over the image
  // its source ran, usable by sandboxes, agents, functions and jobs like any image of the store.
  v0.post('/snapshots/:snapshotName/image', async (req, reply) => {
    const a = requireRole(req, 'member');
    const rec = await snapshots.get(a.workspace, params(req).snapshotName);
    const name = (req.body as { name?: unknown } | undefined)?.name;
    if (typeof name !== 'string' || !name)
      throw invalid([{ pointer: '/name', message: 'the image name to give it, e.g. my-template:1' }]);
    const base = rec.sourceSpec?.runtime?.image;
    if (!deps.images || typeof base !== 'string' || isDefaultImage(base))
      throw new ApiError(
        'INVALID_STATE',
        `snapshot ${rec.id} is of a sandbox on the default image (the host's userland), which is not in the image store: fork it instead, or snapshot a sandbox started on an image`,
      );
    let paths: string[];
    try {
      paths = snapshots.layers.paths(a.workspace, [...rec.layers].reverse());
    } catch {
      // In a cluster, images are made on the leader, and a snapshot's layers are on the node that ran its sandbox
      // (docs/decisions/081-images-across-nodes.md): an image made without them would silently lack its files.
      throw new ApiError(
        'INVALID_STATE',
        `snapshot ${rec.id}'s layers are not on the server that makes the workspace's images (in a cluster, the one leading the controllers; the snapshot is on the node that ran its sandbox)`,
      );
    }
    const dirs = paths.map((d) => join(d, 'root')).filter((d) => existsSync(d));
    const held = await imageFromLayers(
      deps.images,
      a.workspace,
      base,
      dirs,
      name,
      `berth snapshot ${rec.id}`,
    );
    await copiesOf(reply, deps.secondCopy, a.workspace, [held.id, name]);
    return imageView(deps.images, a.workspace, held);
  });

  /** The sandbox of the path, in the caller's workspace; 404 when absent or being deleted. */
  async function sandboxOf(req: FastifyRequest, workspace: string) {
    const o = await resources.get(sandboxKind, workspace, [], params(req).sandboxName);
    if (!o || isGone(o)) throw notFound(`Sandbox ${JSON.stringify(params(req).sandboxName)}`);
    return o;
  }

  v0.get('/sandboxes/:sandboxName/snapshots', async (req) => {
    const a = requireRole(req, 'viewer');
    const o = await sandboxOf(req, a.workspace);
    const mine = await snapshots.list(a.workspace, o.name);
    mine.sort((x, y) => y.createdAt.localeCompare(x.createdAt) || x.id.localeCompare(y.id));
    return views(a.workspace, mine);
  });

  v0.post('/sandboxes/:sandboxName/snapshots', async (req) => {
    const a = requireRole(req, 'member');
    const o = await sandboxOf(req, a.workspace);
    const name = (req.body as { name?: unknown } | undefined)?.name;
    const r = await snapshots.create(a.workspace, o.name, name as string | undefined, a.principal.subject);
    return view(a.workspace, r);
  });

  v0.delete('/sandboxes/:sandboxName/snapshots/:snapshotId', async (req, reply) => {
    const a = requireRole(req, 'member');
    const o = await sandboxOf(req, a.workspace);
    const rec = await snapshots.getOf(a.workspace, o.name, params(req).snapshotId);
    await snapshots.delete(a.workspace, rec.id);
    reply.code(204);
  });

  v0.post('/sandboxes/:sandboxName/snapshots/:snapshotId/restore', async (req) => {
    const a = requireRole(req, 'member');
    const o = await sandboxOf(req, a.workspace);
    const rec = await snapshots.restore(a.workspace, o.name, params(req).snapshotId);
    return { name: o.name, snapshotId: rec.id };
  });

  v0.post('/sandboxes/:sandboxName/fork', async (req, reply) => {
    const a = requireRole(req, 'member');
    const o = await sandboxOf(req, a.workspace);
    const body = (req.body ?? {}) as { snapshotId?: unknown; targetName?: unknown };
    checkFork(body);
    // Before a capture: a fork that cannot be created takes no snapshot.
    if (await resources.get(sandboxKind, a.workspace, [], body.targetName as string))
      throw new ApiError('ALREADY_EXISTS', `sandbox ${JSON.stringify(body.targetName)} already exists`);
    const rec =
      typeof body.snapshotId === 'string'
        ? await snapshots.get(a.workspace, body.snapshotId)
        : await snapshots.create(
            a.workspace,
            o.name,
            `fork-${String(body.targetName).slice(0, 40)}-${Date.now().toString(36)}`,
            a.principal.subject,
          );
    return fork(req, reply, rec);
  });

  /** Refuses what a sandbox fork cannot honour, before anything is captured or created. */
  function checkFork(body: Record<string, unknown>) {
    const issues = [];
    if (typeof body.targetName !== 'string' || !NAME.test(body.targetName))
      issues.push({
        pointer: '/targetName',
        message: 'must be a sandbox name: lowercase letters, digits and -',
      });
    const type = body.targetType ?? 'sandbox';
    if (type === 'application')
      issues.push({
        pointer: '/targetType',
        message: 'Berth has no Application kind: fork into a sandbox (targetType sandbox)',
      });
    else if (type !== 'sandbox') issues.push({ pointer: '/targetType', message: 'must be sandbox' });
    for (const f of APPLICATION_ONLY)
      if (body[f] !== undefined)
        issues.push({
          pointer: `/${f}`,
          message: 'applies to a fork into an application, which Berth does not have',
        });
    if (body.snapshotId !== undefined && typeof body.snapshotId !== 'string')
      issues.push({ pointer: '/snapshotId', message: 'must be a snapshot id' });
    if (body.envs !== undefined && !Array.isArray(body.envs))
      issues.push({ pointer: '/envs', message: 'must be a list of {name, value}' });
    if (issues.length) throw invalid(issues);
  }

  /**
   * A new sandbox on the snapshot's stack, with the spec it was captured with (its image, memory, ports, envs with
   * `envs` on top; not its volumes: a volume is attached to one sandbox at a time), answered once it runs.
   */
  async function fork(req: FastifyRequest, reply: FastifyReply, rec: SnapshotRecord) {
    const a = requireRole(req, 'member');
    const body = (req.body ?? {}) as Record<string, unknown>;
    checkFork(body);
    const spec = resources.openSecrets(sandboxKind, rec.sourceSpec ?? {});
    delete spec.volumes;
    spec.enabled = true;
    const envs = body.envs as { name?: unknown; value?: unknown }[] | undefined;
    if (envs?.length) {
      spec.runtime ??= {};
      const merged = new Map<string, unknown>(
        (spec.runtime.envs ?? []).map((e: { name: string; value: unknown }) => [e.name, e.value]),
      );
      for (const e of envs) merged.set(e?.name as string, e?.value);
      spec.runtime.envs = [...merged].map(([name, value]) => ({ name, value }));
    }
    const { object } = await resources.create(
      sandboxKind,
      {
        workspace: a.workspace,
        parents: [],
        actor: a.principal.subject,
        role: a.role,
        serverFields: { rootLayers: rec.layers, restoredFrom: rec.id },
      },
      { metadata: { name: body.targetName }, spec },
    );
    const { settled } = await waitSettled(resources.store, keyOf(object), deps.waitMs ?? CREATE_WAIT_MS);
    if (!settled) reply.code(504);
    return { name: object.name, snapshotId: rec.id, type: 'sandbox' };
  }

  /** Archive and unarchive: a state change the sandbox reconciler carries out, asked only from the state it leaves. */
  const transition = (from: Status, to: Status, verb: string) => async (req: FastifyRequest) => {
    const a = requireRole(req, 'member');
    const o = await sandboxOf(req, a.workspace);
    if (o.body.status !== from)
      throw new ApiError(
        'INVALID_STATE',
        `sandbox ${JSON.stringify(o.name)} is ${o.body.status}: only a ${from} sandbox is ${verb}d`,
      );
    const d = await resources.updateStatus(keyOf(o), {
      to,
      message: `${verb} asked by ${a.principal.subject}`,
      when: (cur) => cur.body.status === from,
    });
    if (!d) throw new ApiError('CONFLICT', `sandbox ${JSON.stringify(o.name)} changed meanwhile; ask again`);
    return resources.view(sandboxKind, d);
  };
  v0.post('/sandboxes/:sandboxName/archive', transition('DEPLOYED', 'ARCHIVING', 'archive'));
  v0.post('/sandboxes/:sandboxName/unarchive', transition('ARCHIVED', 'UNARCHIVING', 'unarchive'));
}
