// The token servers of one cluster show each other on their peer routes (`/peer/code/…`, `/peer/images/…`): derived
// from the master key every server shares, so no tenant can make it. A route that checks it answers 404 to anyone
// else, the same answer as for what it does not have.
import { timingSafeEqual } from 'node:crypto';
import { derivedKey } from './derived-keys.js';

export const PEER_TOKEN_HEADER = 'x-berth-peer-token';

/** The token of the cluster whose master key is `masterKey`. */
export function peerToken(masterKey: Buffer): string {
  return derivedKey(masterKey, 'peerToken').toString('base64url');
}

/** Whether a request's headers show `token` (compared in constant time). */
export function showsPeerToken(headers: Record<string, unknown>, token: string): boolean {
  const shown = Buffer.from(String(headers[PEER_TOKEN_HEADER] ?? ''));
  const want = Buffer.from(token);
  return shown.length === want.length && timingSafeEqual(shown, want);
}
