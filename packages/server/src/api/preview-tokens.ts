// Preview tokens (§2.7, docs/compat.md): access tokens of a private preview, under
// /sandboxes/{sandboxName}/previews/{previewName}/tokens. The value is random, returned once by the
// POST and stored only as a sha256 hash; lists and deletes never show it.
import { randomBytes } from 'node:crypto';
import { Type } from '../kinds/typebox.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Name, opt, Timestamp } from '../kinds/common.js';
import { PREVIEW_TOKEN_KIND, preview as previewKind } from '../kinds/preview.js';
import { checkValue, prune } from '../kinds/schema.js';
import { isGone } from '../kinds/status.js';
import type { Resources } from '../store/resources.js';
import { keyOf, type ResourceKey, StoreError, type StoredObject } from '../store/store.js';
import {
  findTokenByValue,
  hashToken,
  TOKEN_PREFIX,
  type TokenRecord,
  tokenParent,
} from '../auth/preview-token.js';
import { requireRole } from '../auth/require-role.js';
import { warnDropped } from './crud.js';
import { ApiError, invalid, notFound } from '../errors.js';
import { listPage } from './pagination.js';

/**
 * A name of the form the SDK makes up itself (`token-<Date.now()>`), not one its caller chose: when it is taken
 * (tokens created in the same millisecond) the token gets it with a random suffix instead of a 409 (decision 085).
 */
const SDK_TOKEN_NAME = /^token-\d+$/;
/** Attempts at a free suffixed name before the 409: each suffix has 2^32 values. */
const SUFFIX_TRIES = 5;

/** Tokens one preview may hold; each is checked on every private request, so the list stays short. */
export const MAX_TOKENS_PER_PREVIEW = 100;

export const CreateBody = Type.Object({
  metadata: opt(Type.Object({ name: opt(Name) })),
  spec: Type.Object({ expiresAt: Timestamp }),
});

/** Fields of a token response a client may send back; dropped without a warning. */
const ECHOED = {
  metadata: ['previewName', 'resourceName', 'resourceType', 'workspace'],
  spec: ['token', 'expired'],
};

export interface PreviewTokenDeps {
  resources: Resources;
  now?: () => Date;
}

export function view(o: StoredObject, nowMs: number, token?: string) {
  const r = o.body as TokenRecord;
  return {
    metadata: { ...r.metadata },
    spec: {
      ...(token ? { token } : {}),
      expiresAt: r.spec.expiresAt,
      expired: Date.parse(r.spec.expiresAt) <= nowMs,
    },
  };
}

export function register(v0: FastifyInstance, deps: PreviewTokenDeps) {
  const { resources } = deps;
  const now = deps.now ?? (() => new Date());
  const base = '/sandboxes/:sandboxName/previews/:previewName/tokens';

  async function previewOf(req: FastifyRequest, workspace: string) {
    const { sandboxName, previewName } = req.params as Record<string, string>;
    await resources.checkParents(previewKind, workspace, [sandboxName]);
    const p = await resources.mustGet(previewKind, workspace, [sandboxName], previewName);
    return { p, sandboxName, previewName, parent: tokenParent(sandboxName, previewName) };
  }

  v0.post(base, async (req, reply) => {
    const a = requireRole(req, 'member');
    const { p, sandboxName, previewName, parent } = await previewOf(req, a.workspace);
    if (isGone(p))
      throw new ApiError('INVALID_STATE', `preview ${JSON.stringify(previewName)} is being deleted`);
    const body = structuredClone(req.body ?? {}) as any;
    if (body && typeof body === 'object')
      for (const [part, keys] of Object.entries(ECHOED))
        if (body[part] && typeof body[part] === 'object') for (const k of keys) delete body[part][k];
    const dropped = prune(CreateBody, body);
    const issues = checkValue(CreateBody, body);
    if (issues.length) throw invalid(issues);
    const at = now();
    const expiresMs = Date.parse(body.spec.expiresAt);
    if (expiresMs <= at.getTime())
      throw invalid([{ pointer: '/spec/expiresAt', message: 'must be in the future' }]);
    const existing = await resources.store.list({ kind: PREVIEW_TOKEN_KIND, workspace: a.workspace, parent });
    if (existing.length >= MAX_TOKENS_PER_PREVIEW)
      throw new ApiError(
        'QUOTA_EXCEEDED',
        `preview ${JSON.stringify(previewName)} already has ${MAX_TOKENS_PER_PREVIEW} tokens; delete some first`,
      );
    const asked: string | undefined = body.metadata?.name;
    const generated = asked === undefined || SDK_TOKEN_NAME.test(asked);
    const stem = asked ?? 'token';
    const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
    for (let attempt = 0; ; attempt++) {
      const name = asked !== undefined && attempt === 0 ? asked : `${stem}-${randomBytes(4).toString('hex')}`;
      const record: TokenRecord = {
        metadata: {
          name,
          previewName,
          resourceName: sandboxName,
          resourceType: 'Sandbox',
          workspace: a.workspace,
        },
        spec: { expiresAt: new Date(expiresMs).toISOString() },
        tokenHash: hashToken(token).toString('hex'),
        previewCreatedAt: p.body.metadata.createdAt,
        createdAt: at.toISOString(),
        createdBy: a.principal.subject,
      };
      const key: ResourceKey = { kind: PREVIEW_TOKEN_KIND, workspace: a.workspace, parent, name };
      try {
        const [o] = await resources.store.write([
          { op: 'create', key, body: record as unknown as Record<string, any> },
        ]);
        warnDropped(reply, dropped);
        return view(o, at.getTime(), token);
      } catch (e) {
        if (!(e instanceof StoreError && e.reason === 'exists')) throw e;
        if (!generated || attempt >= SUFFIX_TRIES)
          throw new ApiError('ALREADY_EXISTS', `preview token ${JSON.stringify(name)} already exists`, {
            code: 'PREVIEW_TOKEN_ALREADY_EXISTS',
          });
      }
    }
  });

  v0.get(base, async (req, reply) => {
    const a = requireRole(req, 'viewer');
    const { parent } = await previewOf(req, a.workspace);
    const page = await listPage(resources.store, PREVIEW_TOKEN_KIND, a.workspace, parent, req, reply);
    const nowMs = now().getTime();
    return page.map((o) => view(o, nowMs));
  });

  /**
   * A token by its name, or by its value (the SDK's `tokens.delete(token.value)`): a value is found by its hash
   * among this preview's tokens only, and a miss answers as a missing name does, without echoing the value.
   */
  async function tokenOf(workspace: string, parent: string, nameOrValue: string) {
    if (!nameOrValue.startsWith(TOKEN_PREFIX))
      return resources.store.get({ kind: PREVIEW_TOKEN_KIND, workspace, parent, name: nameOrValue });
    return findTokenByValue(resources.store, workspace, parent, nameOrValue);
  }

  v0.delete(`${base}/:tokenName`, async (req) => {
    const a = requireRole(req, 'member');
    const { parent } = await previewOf(req, a.workspace);
    const { tokenName } = req.params as Record<string, string>;
    const what = tokenName.startsWith(TOKEN_PREFIX)
      ? 'preview token (by value)'
      : `preview token ${JSON.stringify(tokenName)}`;
    const o = await tokenOf(a.workspace, parent, tokenName);
    if (!o) throw notFound(what);
    try {
      await resources.store.write([{ op: 'delete', key: keyOf(o), expectVersion: o.resourceVersion }]);
    } catch (e) {
      if (e instanceof StoreError) throw notFound(what);
      throw e;
    }
    return view(o, now().getTime());
  });
}
