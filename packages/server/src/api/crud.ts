// Generic routes: every kind in the registry gets POST/GET(list)/GET/PUT/DELETE at its paths (§4.1).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Authenticator } from '../auth/access.js';
import { requireRole, wantsSecrets } from '../auth/require-role.js';
import { unknownFieldIssues } from '../kinds/field-suggestions.js';
import { checkBody, schemasOf } from '../kinds/schema.js';
import type { KindDescriptor } from '../kinds/types.js';
import type { Resources, WriteResult } from '../store/resources.js';
import type { StoredObject } from '../store/store.js';
import { ApiError, notFound } from '../errors.js';
import { isGone } from '../kinds/status.js';
import { listPage, memoryPage, parseLabels } from './pagination.js';
import type { DeleteHook } from './wait.js';
import { wantsWatch, watchAnswer } from './list-watch.js';
import type { WatchLimit } from './watch-stream.js';
import { AnswerTexts, type TextBounds } from './answer-texts.js';
import { listIsBare, listText } from './api-version.js';

/** Wraps a kind's POST (e.g. a sandbox answers once it runs): given the generic create, returns its result. */
export type CreateHook = (
  req: FastifyRequest,
  reply: FastifyReply,
  create: () => Promise<WriteResult>,
) => Promise<Pick<WriteResult, 'object' | 'dropped'> & { created?: boolean }>;

export interface CrudDeps {
  resources: Resources;
  /** By kind name. */
  createHooks?: Record<string, CreateHook>;
  /** By kind name: wraps a kind's PUT the same way (e.g. a sandbox answers once it runs its new spec). */
  replaceHooks?: Record<string, CreateHook>;
  /** By kind name: wraps a kind's DELETE (e.g. a sandbox answers once its deletion is done). */
  deleteHooks?: Record<string, DeleteHook>;
  /** By kind name: called after a create or replace was written (e.g. an upload URL header for `?upload=true`). */
  afterWrite?: Record<
    string,
    (req: FastifyRequest, reply: FastifyReply, object: WriteResult['object']) => void
  >;
  /** What `?watch=true` needs: the credential is resolved again before each change; open watches are counted. */
  watch: { authenticator: Authenticator; limit: WatchLimit };
  /** By kind name: adds fields computed at each read (e.g. the replicas an agent runs now) to the answer. */
  decorate?: Record<string, (kind: string, workspace: string, view: Record<string, any>) => void>;
}

/** What Fastify sends a serialised object as. */
const JSON_TYPE = 'application/json; charset=utf-8';
/** List pages kept: 2,000, 8 MB in all, none over 256 Ki characters (a page of 100 small objects fits). */
const PAGE_BOUNDS: TextBounds = { textsMax: 2_000, totalMaxChars: 8 * 1024 * 1024, textMaxChars: 256 * 1024 };

/** The headers a list page's answer carries besides its type (answerList): kept with the page's text. */
function pageHeaders(reply: FastifyReply): Record<string, string> | undefined {
  const next = reply.getHeader('X-Next-Cursor');
  const link = reply.getHeader('Link');
  if (typeof next !== 'string' || typeof link !== 'string') return undefined;
  return { 'X-Next-Cursor': next, Link: link };
}

const toFastifyPath = (p: string) => p.replace(/\{(\w+)\}/g, ':$1');

function parentsOf(kd: KindDescriptor, params: Record<string, string>) {
  return (kd.parents ?? []).map((p) => params[p.param]);
}

/** Kubernetes-style warning for dropped unknown fields: `299 - "unknown field \"/spec/x\""`. */
export function warnDropped(reply: FastifyReply, dropped: string[]) {
  if (dropped.length)
    reply.header(
      'Warning',
      dropped.map((p) => `299 - "unknown field ${JSON.stringify(p).slice(1, -1)}"`).join(', '),
    );
}

/**
 * The response of a create or replace: the object, plus `warnings` naming each unknown field that was dropped
 * (with a suggestion where one is obvious) — only when there are some, so a clean write looks as it always did.
 */
export function withWarnings(view: Record<string, unknown>, kd: KindDescriptor, dropped: string[]) {
  if (!dropped.length) return view;
  return { ...view, warnings: unknownFieldIssues(schemasOf(kd).input, dropped) };
}

/**
 * `?fieldValidation=Strict` (the CLI's default): unknown fields are refused before the store sees the body, with
 * the same suggestions the warnings carry. A body that fails validation otherwise is left to the store to judge.
 */
function refuseUnknown(kd: KindDescriptor, raw: unknown, pathName?: string) {
  let body = raw;
  const meta = (raw as { metadata?: unknown } | null)?.metadata;
  if (pathName && meta && typeof meta === 'object' && !Array.isArray(meta) && !('name' in meta))
    body = { ...(raw as object), metadata: { ...meta, name: pathName } };
  const checked = checkBody(kd, body);
  if (!checked.ok || !checked.value.unknown.length) return;
  const { unknown } = checked.value;
  throw new ApiError('MALFORMED_REQUEST', `unknown fields: ${unknown.join(', ')}`, {
    errors: unknownFieldIssues(schemasOf(kd).input, unknown, 'is not a known field'),
  });
}

/**
 * Which stored objects a list shows: TERMINATED records (kept for a while after a delete) only with
 * `?showTerminated=true`, as the service does; a child object (e.g. a preview, which the SDK's sessions are)
 * leaves its parent's list as soon as its delete is accepted; with `?externalId=`, only objects carrying it.
 */
function listFilter(kd: KindDescriptor, req: FastifyRequest): ((o: StoredObject) => boolean) | undefined {
  const q = (req.query ?? {}) as Record<string, string>;
  const showTerminated = q.showTerminated === 'true';
  const ext = kd.metadataInput?.externalId ? q.externalId : undefined;
  const hideDeleting = !!kd.parents?.length;
  if (showTerminated && ext === undefined && !hideDeleting) return undefined;
  return (o) =>
    (showTerminated || o.body.status !== 'TERMINATED') &&
    !(hideDeleting && isGone(o)) &&
    (ext === undefined || o.body.metadata?.externalId === ext);
}

/** The most recently created object with this externalId that is not being deleted (as read now), if any. */
async function byExternalId(
  resources: Resources,
  kd: KindDescriptor,
  workspace: string,
  parents: string[],
  externalId: string,
) {
  let best: any;
  for (const o of await resources.store.list({ kind: kd.kind, workspace, parent: parents.join('/') })) {
    if (o.body.metadata?.externalId !== externalId) continue;
    const view = resources.view(kd, o);
    if (isGone(view)) continue;
    if (!best || String(view.metadata.createdAt) > String(best.metadata.createdAt)) best = view;
  }
  return best;
}

export function registerCrud(
  app: FastifyInstance,
  kinds: KindDescriptor[],
  {
    resources,
    watch,
    createHooks = {},
    replaceHooks = {},
    deleteHooks = {},
    afterWrite = {},
    decorate = {},
  }: CrudDeps,
) {
  const { store } = resources;
  const answers = new AnswerTexts();
  const pages = new AnswerTexts(PAGE_BOUNDS);
  for (const kd of kinds) {
    /** The object as a read answers it: redacted unless `show`, then decorated with what is computed now. */
    const viewOf = (o: StoredObject, show = false) => {
      const v = resources.view(kd, o, show);
      decorate[kd.kind]?.(kd.kind, o.workspace, v);
      return v;
    };
    // An answer without secrets opened and without fields computed at each read is the same text for as long as
    // the object's version is: kept, and sent again while the store says that version is still the current one.
    const textsKept = !!store.versionOf && !kd.decorate && !decorate[kd.kind];
    const coll = toFastifyPath(kd.path);
    const item = `${coll}/:${kd.nameParam}`;
    const readRole = kd.readRole ?? 'viewer';
    const writeRole = kd.writeRole ?? 'member';
    const ctxOf = (req: FastifyRequest) => {
      const a = requireRole(req, writeRole);
      const q = (req.query ?? {}) as Record<string, string>;
      return {
        workspace: a.workspace,
        parents: parentsOf(kd, req.params as Record<string, string>),
        actor: a.principal.subject,
        role: a.role,
        strict: q.fieldValidation === 'Strict',
      };
    };

    app.get(coll, async (req, reply) => {
      const a = requireRole(req, readRole);
      const show = wantsSecrets(req);
      const parents = parentsOf(kd, req.params as Record<string, string>);
      await resources.checkParents(kd, a.workspace, parents);
      if (wantsWatch(req))
        return watchAnswer(req, reply, {
          ...watch,
          store: resources.store,
          kind: kd.kind,
          readRole,
          workspace: a.workspace,
          parent: parents.join('/'),
          view: (o) => viewOf(o, show),
          keep: listFilter(kd, req),
        });
      // Answered from kept texts, the page's objects are only read (a view copies what it changes): the store
      // need not copy their bodies.
      const fromTexts = textsKept && !show;
      const group = { kind: kd.kind, workspace: a.workspace, parent: parents.join('/') };
      // A page is the same text while no object of its group was written (the number is read before the page is
      // made: a write meanwhile leaves the page kept under an older number, never sent).
      const version = fromTexts ? store.listVersion?.(group) : undefined;
      const pageKey =
        version === undefined ? undefined : `${a.workspace}\u0000${listIsBare(req, kd.kind)}\u0000${req.url}`;
      const kept = pageKey === undefined ? undefined : pages.kept(pageKey, version);
      if (kept) {
        reply.headers(kept.headers ?? {});
        return reply.type(JSON_TYPE).send(kept.text);
      }
      const page = await listPage(
        resources.store,
        kd.kind,
        a.workspace,
        group.parent,
        req,
        reply,
        listFilter(kd, req),
        fromTexts,
      );
      // Each object's text as its GET answers it (kept by version), joined as JSON.stringify writes the page.
      if (!fromTexts) return page.map((o) => viewOf(o, show));
      const texts = page.map((o) => {
        let text = answers.get(o, o.resourceVersion);
        if (text === undefined) {
          text = JSON.stringify(viewOf(o, false));
          answers.set(o, o.resourceVersion, text);
        }
        return text;
      });
      const text = listText(req, reply, texts, kd.kind);
      if (pageKey !== undefined && version !== undefined)
        pages.keep(pageKey, version, { text, headers: pageHeaders(reply) });
      return reply.type(JSON_TYPE).send(text);
    });

    // Every parent's objects at once: ordered by name, then parent (two parents may hold the same name).
    if (kd.everyParentPath)
      app.get(kd.everyParentPath, async (req, reply) => {
        const a = requireRole(req, readRole);
        const show = wantsSecrets(req);
        const labels = parseLabels(((req.query ?? {}) as Record<string, string>).labels);
        const keep = listFilter(kd, req) ?? (() => true);
        const all = (await resources.store.list({ kind: kd.kind, workspace: a.workspace, labels })).filter(
          keep,
        );
        return memoryPage(all, (o) => [o.name, o.parent], req, reply).map((o) => resources.view(kd, o, show));
      });

    if (kd.metadataInput?.externalId)
      app.get(`${coll}/by-external-id/:externalId`, async (req) => {
        const a = requireRole(req, readRole);
        const params = req.params as Record<string, string>;
        const parents = parentsOf(kd, params);
        await resources.checkParents(kd, a.workspace, parents);
        const found = await byExternalId(resources, kd, a.workspace, parents, params.externalId);
        if (!found) throw notFound(`${kd.kind} with externalId ${JSON.stringify(params.externalId)}`);
        return found;
      });

    app.get(item, async (req, reply) => {
      const a = requireRole(req, readRole);
      const show = wantsSecrets(req);
      const params = req.params as Record<string, string>;
      const parents = parentsOf(kd, params);
      const keep = textsKept && !show && !wantsWatch(req);
      if (keep) {
        const key = resources.key(kd, a.workspace, parents, params[kd.nameParam]);
        const text = answers.get(key, store.versionOf?.(key));
        if (text !== undefined) return reply.type(JSON_TYPE).send(text);
      }
      const o = await resources.mustGet(kd, a.workspace, parents, params[kd.nameParam]);
      if (keep) {
        const text = JSON.stringify(viewOf(o, false));
        answers.set(o, o.resourceVersion, text);
        return reply.type(JSON_TYPE).send(text);
      }
      if (wantsWatch(req))
        return watchAnswer(req, reply, {
          ...watch,
          store: resources.store,
          kind: kd.kind,
          readRole,
          workspace: a.workspace,
          parent: parents.join('/'),
          name: o.name,
          view: (x) => viewOf(x, show),
        });
      return viewOf(o, show);
    });

    if (kd.readOnlyKind) continue;

    app.post(coll, async (req, reply) => {
      if (ctxOf(req).strict) refuseUnknown(kd, req.body);
      const create = () => resources.create(kd, ctxOf(req), req.body);
      const r = await (createHooks[kd.kind]?.(req, reply, create) ?? create());
      afterWrite[kd.kind]?.(req, reply, r.object);
      warnDropped(reply, r.dropped);
      return withWarnings(resources.view(kd, r.object, false, r.created ?? true), kd, r.dropped);
    });

    app.put(item, async (req, reply) => {
      const params = req.params as Record<string, string>;
      if (ctxOf(req).strict) refuseUnknown(kd, req.body, params[kd.nameParam]);
      const replace = () => resources.replace(kd, ctxOf(req), params[kd.nameParam], req.body);
      const r = await (replaceHooks[kd.kind]?.(req, reply, replace) ?? replace());
      afterWrite[kd.kind]?.(req, reply, r.object);
      warnDropped(reply, r.dropped);
      return withWarnings(resources.view(kd, r.object, false, r.created === true), kd, r.dropped);
    });

    app.delete(item, async (req) => {
      const params = req.params as Record<string, string>;
      const del = () => resources.delete(kd, ctxOf(req), params[kd.nameParam]);
      const o = await (deleteHooks[kd.kind]?.(req, del) ?? del());
      return resources.view(kd, o);
    });
  }
}
