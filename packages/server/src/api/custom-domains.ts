// Custom domains (decision 055), in the service's shape: a workspace claims a domain and gets a TXT record to publish
// (`pending`); `verify` reads it through the configured resolvers and the domain is `verified` — the first workspace
// to verify it holds its label in the address table, in the same transaction (store/host-labels.ts), so no two
// workspaces ever hold one domain — or `failed` with why. A verified domain routes to the application whose
// spec.urls names it (gateway/custom-domains.ts). An admin of the owner may offer it to another workspace (`share`):
// nothing is granted until an admin of that workspace accepts (`POST .../accept`), which copies the record there (the
// service's shared copy, `metadata.sharedFromWorkspace`); the owner may revoke it at any time. Any other workspace is
// answered 404 for a domain it does not hold, as for anything not its own.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { requireRole } from '../auth/require-role.js';
import { ApiError, invalid } from '../errors.js';
import { NAME_PATTERN } from '../kinds/common.js';
import {
  CUSTOM_DOMAIN_KIND,
  CUSTOM_DOMAIN_SHARE_KIND,
  appUrlLabel,
  challengeName,
  challengeValue,
  domainIssues,
  domainLabel,
  newChallengeToken,
} from '../kinds/custom-domain.js';
import type { TxtLookup } from '../outbound/dns-txt.js';
import {
  claimLabelOps,
  holdsLabel,
  hostLabelKey,
  isLabelRace,
  releaseLabelOps,
} from '../store/host-labels.js';
import { recordEvent } from '../store/status-writes.js';
import type { ResourceKey, Store, StoredObject, WriteOp } from '../store/store.js';

export interface CustomDomainDeps {
  store: Store;
  lookupTxt: TxtLookup;
  workspaceExists: (name: string) => Promise<boolean>;
  now?: () => Date;
  inferenceHost?: string;
}

const WORKSPACE = new RegExp(NAME_PATTERN);
const DOMAIN_TYPES = ['previews', 'applications'];
/** Spec fields only the server writes: dropped from a request (a client sends back what it read). */
const SERVER_FIELDS = ['status', 'txtRecords', 'cnameRecords', 'lastVerifiedAt', 'verificationError'];

const keyOf = (workspace: string, domain: string): ResourceKey => ({
  kind: CUSTOM_DOMAIN_KIND,
  workspace,
  parent: '',
  name: domain,
});
const shareKey = (source: string, domain: string, target: string): ResourceKey => ({
  kind: CUSTOM_DOMAIN_SHARE_KIND,
  workspace: source,
  parent: domain,
  name: target,
});

const notFound = (domain: string) =>
  new ApiError('NOT_FOUND', `custom domain ${JSON.stringify(domain)} not found`);

/** The service's CustomDomain: metadata and spec; the challenge token only as the TXT value to publish. */
function view(o: StoredObject) {
  const b = o.body;
  return { metadata: { ...b.metadata, workspace: o.workspace }, spec: b.spec };
}

/** The writable spec fields of a request, judged; server-written ones dropped. */
function specInput(body: any): Record<string, unknown> {
  const spec = { ...(body?.spec ?? {}) };
  for (const f of SERVER_FIELDS) delete spec[f];
  const issues = [];
  if (spec.domainType !== undefined && !DOMAIN_TYPES.includes(spec.domainType as string))
    issues.push({ pointer: '/spec/domainType', message: `must be one of ${DOMAIN_TYPES.join(', ')}` });
  if (spec.region !== undefined && typeof spec.region !== 'string')
    issues.push({ pointer: '/spec/region', message: 'must be a string' });
  if (spec.fallbackPreviewId !== undefined)
    issues.push({
      pointer: '/spec/fallbackPreviewId',
      message:
        'a fallback preview is not served: a verified domain routes to the application naming it in spec.urls',
    });
  if (Array.isArray(spec.subjectAlternativeNames) && spec.subjectAlternativeNames.length > 0)
    issues.push({
      pointer: '/spec/subjectAlternativeNames',
      message: 'Berth issues no certificates: claim each name as a custom domain of its own',
    });
  const known = new Set(['domainType', 'region', 'fallbackPreviewId', 'subjectAlternativeNames']);
  for (const k of Object.keys(spec))
    if (!known.has(k)) issues.push({ pointer: `/spec/${k}`, message: 'unknown field' });
  if (issues.length) throw invalid(issues);
  delete spec.subjectAlternativeNames;
  return spec;
}

/**
 * A workspace that can no longer use a domain lets its application's `url:<domain>` label go in the same write
 * (decision 055, second pass): otherwise the application would keep the domain from its next verified owner (409).
 * `from`: the workspaces losing the domain, or every one when the verification of the record `verifiedBy` ends. The application is told after the
 * write (`tellReleased`): its spec still lists the domain, which routes nowhere until it is usable and written again.
 */
async function releaseAppUrlOps(
  store: Store,
  domain: string,
  from: string[] | { verifiedBy: ResourceKey },
): Promise<{ ops: WriteOp[]; app?: ResourceKey }> {
  // A pending or failed claim ends nothing: only the record holding the domain's label verified it.
  if (!Array.isArray(from) && !(await holdsLabel(store, domainLabel(domain), from.verifiedBy)))
    return { ops: [] };
  const row = await store.get(hostLabelKey(appUrlLabel(domain)));
  const app = (row?.body as { owner?: ResourceKey } | undefined)?.owner;
  if (!row || !app || (Array.isArray(from) && !from.includes(app.workspace))) return { ops: [] };
  return {
    ops: [{ op: 'delete', key: hostLabelKey(appUrlLabel(domain)), expectVersion: row.resourceVersion }],
    app,
  };
}

export function registerCustomDomains(v0: FastifyInstance, deps: CustomDomainDeps) {
  const { store } = deps;
  const clock = deps.now ?? (() => new Date());
  const now = () => clock().toISOString();
  /** Says on the application that lost a domain's label why its URL no longer routes (never silently). */
  const tellReleased = async (app: ResourceKey | undefined, domain: string, why: string) => {
    if (!app) return;
    await recordEvent(
      store,
      clock,
      app,
      app.kind === 'Preview'
        ? `custom domain ${domain} no longer routes to this preview: ${why}; spec.customDomain still names it — once the domain is usable here again, write the preview to claim it, or remove spec.customDomain`
        : `custom domain ${domain} no longer routes to this application: ${why}; spec.urls still lists it — once the domain is usable here again, write the application to claim it, or remove it from spec.urls`,
    );
  };
  const param = (req: FastifyRequest, p = 'domainName') => (req.params as Record<string, string>)[p] ?? '';
  const mustGet = async (workspace: string, domain: string) => {
    const o = await store.get(keyOf(workspace, domain));
    if (!o) throw notFound(domain);
    return o;
  };
  /** The workspace's own record (not a shared copy): what only the owner may change. */
  const owned = async (workspace: string, domain: string) => {
    const o = await mustGet(workspace, domain);
    if (o.body.metadata?.sharedFromWorkspace)
      throw new ApiError(
        'FORBIDDEN',
        `custom domain ${domain} is shared from workspace ${o.body.metadata.sharedFromWorkspace}: only it may change the domain`,
      );
    return o;
  };

  /**
   * At a verification: an object of a workspace that may not use the domain (not the verifier, and no accepted share
   * of it) lets its label go, so nothing that names a domain before its owner proves it keeps it from the owner.
   */
  const releaseStaleHolder = async (domain: string, verifier: string) => {
    const row = await store.get(hostLabelKey(appUrlLabel(domain)));
    const holder = (row?.body as { owner?: ResourceKey } | undefined)?.owner;
    if (!holder || holder.workspace === verifier) return { ops: [] };
    const copy = await store.get(keyOf(holder.workspace, domain));
    if (copy?.body.metadata?.sharedFromWorkspace === verifier) return { ops: [] };
    return releaseAppUrlOps(store, domain, [holder.workspace]);
  };

  v0.get('/customdomains', async (req) => {
    const a = requireRole(req, 'viewer');
    const list = await store.list({ kind: CUSTOM_DOMAIN_KIND, workspace: a.workspace, parent: '' });
    return list.map(view);
  });

  const create = async (req: FastifyRequest, application?: string) => {
    const a = requireRole(req, 'admin');
    const body = req.body as any;
    const domain = body?.metadata?.name;
    const issues = domainIssues(domain, '/metadata/name', deps.inferenceHost);
    if (issues.length) throw invalid(issues);
    const spec = specInput(body);
    if (application !== undefined) {
      const app = await store.get({
        kind: 'Application',
        workspace: a.workspace,
        parent: '',
        name: application,
      });
      if (!app) throw new ApiError('NOT_FOUND', `Application ${JSON.stringify(application)} not found`);
      spec.domainType = 'applications';
    }
    // Verified by another workspace: its label is held; claiming it here could never succeed.
    const held = await store.get(hostLabelKey(domainLabel(domain)));
    if (held && (held.body as { owner: ResourceKey }).owner.workspace !== a.workspace)
      throw new ApiError('CONFLICT', `custom domain ${domain} is verified by another workspace`);
    const token = newChallengeToken();
    const t = now();
    const record = {
      metadata: {
        name: domain,
        displayName: typeof body?.metadata?.displayName === 'string' ? body.metadata.displayName : domain,
        ...(body?.metadata?.labels ? { labels: body.metadata.labels } : {}),
        createdAt: t,
        updatedAt: t,
        createdBy: a.principal.subject,
        updatedBy: a.principal.subject,
      },
      spec: {
        domainType: 'applications',
        ...spec,
        status: 'pending',
        txtRecords: { [challengeName(domain)]: challengeValue(token) },
      },
    };
    try {
      const [o] = await store.write([{ op: 'create', key: keyOf(a.workspace, domain), body: record }]);
      return view(o as StoredObject);
    } catch (err) {
      if ((err as { reason?: string }).reason === 'exists')
        throw new ApiError('CONFLICT', `custom domain ${domain} already exists in this workspace`);
      throw err;
    }
  };
  v0.post('/customdomains', (req) => create(req));
  // The service's per-application form: the same claim, typed for applications (the app must exist).
  v0.post('/applications/:applicationName/customdomains', (req) =>
    create(req, param(req, 'applicationName')),
  );

  v0.get('/customdomains/:domainName', async (req) => {
    const a = requireRole(req, 'viewer');
    return view(await mustGet(a.workspace, param(req)));
  });

  v0.put('/customdomains/:domainName', async (req) => {
    const a = requireRole(req, 'admin');
    const domain = param(req);
    const cur = await owned(a.workspace, domain);
    const spec = specInput(req.body);
    const body = req.body as any;
    const [o] = await store.write([
      {
        op: 'update',
        key: keyOf(a.workspace, domain),
        expectVersion: cur.resourceVersion,
        body: {
          ...cur.body,
          metadata: {
            ...cur.body.metadata,
            ...(typeof body?.metadata?.displayName === 'string'
              ? { displayName: body.metadata.displayName }
              : {}),
            ...(body?.metadata?.labels ? { labels: body.metadata.labels } : {}),
            updatedAt: now(),
            updatedBy: a.principal.subject,
          },
          spec: { ...cur.body.spec, ...spec },
        },
      },
    ]);
    return view(o as StoredObject);
  });

  v0.delete('/customdomains/:domainName', async (req) => {
    const a = requireRole(req, 'admin');
    const domain = param(req);
    const cur = await mustGet(a.workspace, domain);
    const ops: WriteOp[] = [
      { op: 'delete', key: keyOf(a.workspace, domain), expectVersion: cur.resourceVersion },
    ];
    const source: string | undefined = cur.body.metadata?.sharedFromWorkspace;
    // The domain's verification ends with the owner's record; a copy's delete ends this workspace's use of it.
    const released = await releaseAppUrlOps(
      store,
      domain,
      source ? [a.workspace] : { verifiedBy: keyOf(a.workspace, domain) },
    );
    ops.push(...released.ops);
    // A copy's delete is the target leaving the share: the owner's offer goes with it.
    if (source && (await store.get(shareKey(source, domain, a.workspace))))
      ops.push({ op: 'delete', key: shareKey(source, domain, a.workspace) });
    if (!source) {
      // The owner's delete takes its label, its offers and the copies it granted with it.
      ops.push(...(await releaseLabelOps(store, [domainLabel(domain)], keyOf(a.workspace, domain))));
      for (const s of await store.list({
        kind: CUSTOM_DOMAIN_SHARE_KIND,
        workspace: a.workspace,
        parent: domain,
      })) {
        ops.push({ op: 'delete', key: shareKey(a.workspace, domain, s.name) });
        const copy = await store.get(keyOf(s.name, domain));
        if (copy?.body.metadata?.sharedFromWorkspace === a.workspace)
          ops.push({ op: 'delete', key: keyOf(s.name, domain) });
      }
    }
    await store.write(ops);
    await tellReleased(
      released.app,
      domain,
      source ? 'this workspace deleted its copy of the shared domain' : 'the custom domain was deleted',
    );
    return view(cur);
  });

  v0.post('/customdomains/:domainName/verify', async (req) => {
    const a = requireRole(req, 'admin');
    const domain = param(req);
    const cur = await owned(a.workspace, domain);
    const [name, expected] = Object.entries(cur.body.spec.txtRecords as Record<string, string>)[0] as [
      string,
      string,
    ];
    let found: string[];
    let error: string | undefined;
    try {
      found = await deps.lookupTxt(name);
      if (!found.includes(expected))
        error = found.length
          ? `the TXT record at ${name} does not hold ${expected} (found ${found.map((f) => JSON.stringify(f)).join(', ')})`
          : `no TXT record at ${name}: publish ${expected} there, then verify again`;
    } catch (err) {
      error = `the TXT record at ${name} could not be read: ${(err as Error).message}`;
    }
    const key = keyOf(a.workspace, domain);
    const t = now();
    for (let attempt = 0; ; attempt++) {
      const latest = await mustGet(a.workspace, domain);
      const spec = {
        ...latest.body.spec,
        status: error ? 'failed' : 'verified',
        lastVerifiedAt: t,
        ...(error ? { verificationError: error } : {}),
      };
      if (!error) delete spec.verificationError;
      const ops: WriteOp[] = [
        { op: 'update', key, expectVersion: latest.resourceVersion, body: { ...latest.body, spec } },
      ];
      // Verified: the domain's label is claimed in the same write, so two workspaces proving the same domain at once
      // cannot both hold it. A label held by another workspace's verified domain is its (409).
      // A failed one lets its label go, and the application label of whichever application named it: only a domain
      // whose challenge holds now routes anywhere.
      try {
        ops.push(...(await (error ? releaseLabelOps : claimLabelOps)(store, [domainLabel(domain)], key)));
      } catch (err) {
        if (err instanceof ApiError && err.name === 'CONFLICT')
          throw new ApiError('CONFLICT', `custom domain ${domain} is verified by another workspace`);
        throw err;
      }
      const released = error
        ? await releaseAppUrlOps(store, domain, { verifiedBy: key })
        : await releaseStaleHolder(domain, a.workspace);
      ops.push(...released.ops);
      try {
        const [o] = await store.write(ops);
        await tellReleased(
          released.app,
          domain,
          error ? `its verification failed (${error})` : 'another workspace verified it',
        );
        return view(o as StoredObject);
      } catch (err) {
        if (attempt < 2 && (isLabelRace(err) || (err as { reason?: string }).reason === 'conflict')) continue;
        throw err;
      }
    }
  });

  v0.get('/customdomains/:domainName/share', async (req) => {
    const a = requireRole(req, 'viewer');
    const domain = param(req);
    await owned(a.workspace, domain);
    const offers = await store.list({
      kind: CUSTOM_DOMAIN_SHARE_KIND,
      workspace: a.workspace,
      parent: domain,
    });
    return offers.map((s) => ({ workspace: s.name, status: s.body.status, workspaceDisplayName: s.name }));
  });

  v0.post('/customdomains/:domainName/share', async (req) => {
    const a = requireRole(req, 'admin');
    const domain = param(req);
    const cur = await owned(a.workspace, domain);
    const target = (req.body as { targetWorkspace?: unknown } | undefined)?.targetWorkspace;
    if (target === 'account')
      throw invalid([
        { pointer: '/targetWorkspace', message: 'Berth has no accounts: share with one workspace at a time' },
      ]);
    if (typeof target !== 'string' || !WORKSPACE.test(target))
      throw invalid([{ pointer: '/targetWorkspace', message: 'must be a workspace name' }]);
    if (target === a.workspace)
      throw invalid([{ pointer: '/targetWorkspace', message: 'the domain is already this workspace’s' }]);
    if (cur.body.spec.status !== 'verified')
      throw new ApiError(
        'INVALID_STATE',
        `custom domain ${domain} is ${cur.body.spec.status}: verify it first`,
      );
    if (!(await deps.workspaceExists(target)))
      throw new ApiError('NOT_FOUND', `workspace ${JSON.stringify(target)} not found`);
    try {
      await store.write([
        {
          op: 'create',
          key: shareKey(a.workspace, domain, target),
          body: { status: 'pending', sharedBy: a.principal.subject, createdAt: now() },
        },
      ]);
    } catch (err) {
      if ((err as { reason?: string }).reason === 'exists')
        throw new ApiError('CONFLICT', `custom domain ${domain} is already shared with ${target}`);
      throw err;
    }
    return view(cur);
  });

  v0.delete('/customdomains/:domainName/share/:targetWorkspace', async (req) => {
    const a = requireRole(req, 'admin');
    const domain = param(req);
    const target = param(req, 'targetWorkspace');
    const cur = await owned(a.workspace, domain);
    const offer = await store.get(shareKey(a.workspace, domain, target));
    if (!offer) throw new ApiError('NOT_FOUND', `custom domain ${domain} is not shared with ${target}`);
    const ops: WriteOp[] = [{ op: 'delete', key: shareKey(a.workspace, domain, target) }];
    const copy = await store.get(keyOf(target, domain));
    if (copy?.body.metadata?.sharedFromWorkspace === a.workspace)
      ops.push({ op: 'delete', key: keyOf(target, domain) });
    const released = await releaseAppUrlOps(store, domain, [target]);
    ops.push(...released.ops);
    await store.write(ops);
    await tellReleased(released.app, domain, 'the workspace that owns it stopped sharing it with this one');
    return view(cur);
  });

  // Berth's consent step (the service's SDK has none: there, sharing stays within one account): an admin of the
  // target accepts the offer, and the domain's record is copied into the target workspace.
  v0.post('/customdomains/:domainName/accept', async (req) => {
    const a = requireRole(req, 'admin');
    const domain = param(req);
    const held = await store.get(hostLabelKey(domainLabel(domain)));
    const source = (held?.body as { owner?: ResourceKey } | undefined)?.owner?.workspace;
    const offer = source && (await store.get(shareKey(source, domain, a.workspace)));
    const original = source && (await store.get(keyOf(source, domain)));
    if (!source || !offer || !original) throw notFound(domain);
    if (await store.get(keyOf(a.workspace, domain)))
      throw new ApiError('CONFLICT', `custom domain ${domain} already exists in this workspace`);
    const t = now();
    const copy = {
      metadata: {
        ...original.body.metadata,
        sharedFromWorkspace: source,
        createdAt: t,
        updatedAt: t,
        createdBy: a.principal.subject,
        updatedBy: a.principal.subject,
      },
      spec: { ...original.body.spec, txtRecords: {} },
    };
    // The original is written as it is, at the version read: an owner's delete or re-verify meanwhile fails this one.
    await store.write([
      {
        op: 'update',
        key: keyOf(source, domain),
        expectVersion: original.resourceVersion,
        body: original.body,
      },
      {
        op: 'update',
        key: shareKey(source, domain, a.workspace),
        expectVersion: offer.resourceVersion,
        body: { ...offer.body, status: 'active', acceptedBy: a.principal.subject, acceptedAt: t },
      },
      { op: 'create', key: keyOf(a.workspace, domain), body: copy },
    ]);
    return view(await mustGet(a.workspace, domain));
  });
}
