// Revisions of agents, functions and jobs (GET /v0/<kind>/{name}/revisions) and the build log of each
// (GET .../revisions/{rev}/logs; `latest` names the build of the last uploaded source, finished or not;
// `?follow=true` streams the log as the build writes it and ends with the build); a model endpoint's one revision.
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { requireRole } from '../auth/require-role.js';
import { BaseImageError, type Builder } from '../builds/builder.js';
import { followLog } from '../builds/log-follow.js';
import type { Executions } from '../controllers/workload/executions.js';
import { ApiError } from '../errors.js';
import type { Resources } from '../store/resources.js';
import type { StoredObject } from '../store/store.js';
import { answerList } from './api-version.js';
import { CODE_KINDS } from './code-upload.js';

/**
 * A model endpoint's revisions in the service's `RevisionMetadata` shape: Berth applies a model's spec as it is
 * written and keeps no earlier one, so the one revision is the current configuration, named by its generation.
 */
export function modelRevisions(o: { body: Record<string, any> }) {
  const m = o.body.metadata ?? {};
  return [
    {
      id: String(m.generation ?? 1),
      active: true,
      canary: false,
      previousActive: false,
      trafficPercent: 100,
      status: String(o.body.status ?? ''),
      createdAt: String(m.updatedAt ?? m.createdAt),
      createdBy: String(m.updatedBy ?? m.createdBy),
    },
  ];
}

/**
 * An application's kept revisions in the service's `AppRevision` shape, newest first: the image as the spec named it
 * (the content it stood for then is `imageId`), its port and memory. Envs are the spec's, applied to every revision,
 * and are not repeated here (they may hold secrets).
 */
export function applicationRevisions(o: { body: Record<string, any> }) {
  const by = o.body.metadata?.updatedBy ?? o.body.metadata?.createdBy;
  return (o.body.revisions ?? []).map((r: Record<string, any>) => ({
    id: r.id,
    image: r.image,
    imageId: r.imageId,
    port: r.port,
    memory: r.memory,
    createdAt: r.createdAt,
    ...(by ? { createdBy: String(by) } : {}),
    active: r.id === o.body.activeRevision,
  }));
}

export interface RevisionRouteDeps {
  resources: Resources;
  builder: Builder;
  executions?: Executions;
}

export function registerRevisionRoutes(
  app: FastifyInstance,
  { resources, builder, executions }: RevisionRouteDeps,
) {
  // An asynchronous invocation (`POST {run}/<ws>/agents/<name>?async=true`) while it runs and for an hour after.
  app.get('/agents/:name/executions/:id', async (req) => {
    const a = requireRole(req, 'viewer');
    const { name, id } = req.params as { name: string; id: string };
    const e = executions?.get(a.workspace, name, id);
    if (!e)
      throw new ApiError('NOT_FOUND', `no execution ${JSON.stringify(id)} of agent ${JSON.stringify(name)}`);
    return e;
  });
  /** The build key of an object's last uploaded source, on the image its spec names (none while that is unusable). */
  const latestKey = (o: StoredObject): string | undefined => {
    const digest: string | undefined = o.body.source?.digest;
    if (!digest) return undefined;
    try {
      return builder.keyOf(o.workspace, digest, builder.baseImage(o.workspace, o.body.spec?.runtime?.image));
    } catch (err) {
      if (err instanceof BaseImageError) return undefined;
      throw err;
    }
  };
  // A model endpoint's one revision: its configuration now (modelRevisions).
  app.get('/models/:name/revisions', async (req, reply) => {
    const a = requireRole(req, 'viewer');
    const o = await resources.mustGet(
      resources.kind('Model'),
      a.workspace,
      [],
      (req.params as { name: string }).name,
    );
    answerList(req, reply);
    return modelRevisions(o);
  });
  // An application's revisions: one list in every API version (the service's SDK reads a bare array).
  app.get('/applications/:name/revisions', async (req) => {
    const a = requireRole(req, 'viewer');
    const name = (req.params as { name: string }).name;
    return applicationRevisions(
      await resources.mustGet(resources.kind('Application'), a.workspace, [], name),
    );
  });
  for (const [plural, kind] of Object.entries(CODE_KINDS)) {
    const kd = resources.kind(kind);
    const load = async (req: FastifyRequest) => {
      const a = requireRole(req, 'viewer');
      return resources.mustGet(kd, a.workspace, [], (req.params as { name: string }).name);
    };
    // At most the last few revisions are kept (decision 023), so the list is one page in every API version.
    app.get(`/${plural}/:name/revisions`, async (req, reply) => {
      const o = await load(req);
      answerList(req, reply);
      const active = o.body.activeRevision;
      return (o.body.revisions ?? []).map((r: Record<string, unknown>) => ({
        ...r,
        active: r.id === active,
      }));
    });
    app.get(`/${plural}/:name/revisions/:rev/logs`, async (req, reply) => {
      const o = await load(req);
      const ws = o.workspace;
      const rev = (req.params as { rev: string }).rev;
      const latest = rev === 'latest';
      const key: string | undefined = latest
        ? latestKey(o)
        : (o.body.revisions ?? []).find((r: { id: string }) => r.id === rev)?.app;
      const follow = (req.query as { follow?: string }).follow === 'true';
      // The build of a just-uploaded source may not have started: followed, its log is awaited while BUILDING.
      const pending = async () => {
        if (!latest || !key || builder.builtByKey(ws, key)) return false;
        const cur = await resources.store.get({ kind, workspace: ws, parent: '', name: o.name });
        return !!cur && cur.body.status === 'BUILDING' && latestKey(cur) === key;
      };
      const exists = key !== undefined && builder.hasLog(ws, key);
      if (!key || (!exists && !(follow && (await pending()))))
        throw new ApiError('NOT_FOUND', `no build log for revision ${JSON.stringify(rev)}`);
      reply.type('text/plain; charset=utf-8');
      if (!follow) return builder.readLog(ws, key);
      const ended = new AbortController();
      req.raw.on('close', () => ended.abort());
      reply.header('cache-control', 'no-cache');
      return Readable.from(
        followLog({
          path: () => (builder.hasLog(ws, key) ? builder.logPath(ws, key) : undefined),
          live: async () => builder.isBuilding(ws, key) || (await pending()),
          signal: ended.signal,
        }),
      );
    });
  }
}
