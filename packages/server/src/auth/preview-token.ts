// Preview tokens as credentials: what a token record holds, and the check that a token opens a private
// preview now. The routes that issue and list tokens are in api/preview-tokens.ts.
import { createHash, timingSafeEqual } from 'node:crypto';
import { PREVIEW_TOKEN_KIND, preview as previewKind } from '../kinds/preview.js';
import { isGone } from '../kinds/status.js';
import type { Store, StoredObject } from '../store/store.js';

export const TOKEN_PREFIX = 'bpt_';

export interface TokenRecord {
  metadata: {
    name: string;
    previewName: string;
    resourceName: string;
    resourceType: 'Sandbox';
    workspace: string;
  };
  spec: { expiresAt: string };
  tokenHash: string;
  /** The preview the token was issued for: a later preview of the same name does not accept it. */
  previewCreatedAt: string;
  createdAt: string;
  createdBy: string;
}

export const hashToken = (token: string) => createHash('sha256').update(token).digest();

export const tokenParent = (sandboxName: string, previewName: string) => `${sandboxName}/${previewName}`;

/** The token record of one preview (`parent`, tokenParent) whose value is `token`: a hash compare, never a scan elsewhere. */
export async function findTokenByValue(
  store: Store,
  workspace: string,
  parent: string,
  token: string,
): Promise<StoredObject | undefined> {
  if (!token.startsWith(TOKEN_PREFIX)) return undefined;
  const h = hashToken(token);
  for (const t of await store.list({ kind: PREVIEW_TOKEN_KIND, workspace, parent })) {
    const stored = Buffer.from((t.body as TokenRecord).tokenHash, 'hex');
    if (stored.length === h.length && timingSafeEqual(stored, h)) return t;
  }
  return undefined;
}

/**
 * Whether `token` opens the preview now: the gateway's check for a private preview. The preview must
 * still exist, not be on its way out, and be the one the token was issued for.
 */
export async function verifyPreviewToken(
  store: Store,
  workspace: string,
  sandboxName: string,
  previewName: string,
  token: string,
  nowMs: number,
): Promise<boolean> {
  if (!token.startsWith(TOKEN_PREFIX)) return false;
  const p = await store.get({ kind: previewKind.kind, workspace, parent: sandboxName, name: previewName });
  if (!p || isGone(p)) return false;
  const t = await findTokenByValue(store, workspace, tokenParent(sandboxName, previewName), token);
  if (!t) return false;
  const r = t.body as TokenRecord;
  return Date.parse(r.spec.expiresAt) > nowMs && r.previewCreatedAt === p.body.metadata.createdAt;
}
