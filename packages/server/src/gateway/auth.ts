// Who may reach a sandbox: a credential (API key or JWT, in any header DESIGN.md §4 names) whose principal is
// a member of the workspace named by the address. The workspace comes from the address, never from a header,
// so a key of workspace A cannot reach B's sandboxes by saying it is in A.
import type { IncomingHttpHeaders } from 'node:http';
import { ApiError } from '../errors.js';
import { type Access, type Authenticator, atLeast } from '../auth/access.js';

/** Headers that carry Berth credentials; removed before a request reaches the sandbox. */
export const CREDENTIAL_HEADERS = [
  'authorization',
  'x-service-authorization',
  'x-blaxel-authorization',
] as const;

/** Headers that carry a preview token (previews.ts); never forwarded either. */
export const PREVIEW_TOKEN_HEADERS = ['x-blaxel-preview-token', 'x-service-preview-token'] as const;
/** Cookie a private preview's token is kept in once given in the query (previews.ts). */
export const PREVIEW_TOKEN_COOKIE = 'bl_preview_token';

/** A Cookie header without the preview token cookie; '' when nothing else is left. */
export function withoutTokenCookie(cookie: string): string {
  return cookie
    .split(';')
    .filter((c) => c.split('=')[0].trim() !== PREVIEW_TOKEN_COOKIE)
    .join(';')
    .trim();
}

/**
 * Resolves the caller for `workspace`: 401 without a valid credential, 404 when the principal is not a
 * member (indistinguishable from a workspace that does not exist), 403 for a viewer (running code in a
 * sandbox is a write: it can read the sandbox's secrets). `unnamed`: the address did not name the workspace (a
 * hashed host label, hostHidesNames); the 404 then says that address is not found, never which workspace holds it.
 */
export async function authorize(
  authn: Authenticator,
  headers: IncomingHttpHeaders,
  workspace: string,
  unnamed?: string,
): Promise<Access> {
  let access: Access;
  try {
    access = await authn.resolve({
      authorization: headers.authorization,
      'x-service-authorization': headers['x-service-authorization'],
      'x-blaxel-authorization': headers['x-blaxel-authorization'],
      'x-service-workspace': workspace,
    });
  } catch (err) {
    if (unnamed && err instanceof ApiError && err.status === 404)
      throw new ApiError('NOT_FOUND', `${unnamed} not found`);
    throw err;
  }
  if (!atLeast(access.role, 'member'))
    throw new ApiError(
      'FORBIDDEN',
      `role ${access.role} in workspace ${workspace} cannot use sandboxes (needs member)`,
    );
  return access;
}
