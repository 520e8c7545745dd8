// Credential values: generation, hashing, comparison, and the `expires_in` durations of API keys.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** API keys carry a prefix so leaked ones are recognisable by secret scanners and by people. */
export const API_KEY_PREFIX = 'bk_';
export const CLIENT_SECRET_PREFIX = 'bcs_';

/** 32 random bytes: high entropy, so a fast sha256 is a safe stored form (no dictionary to attack). */
export const newApiKey = () => API_KEY_PREFIX + randomBytes(32).toString('base64url');
export const newClientSecret = () => CLIENT_SECRET_PREFIX + randomBytes(32).toString('base64url');
export const newClientId = () => `sa-${randomBytes(10).toString('hex')}`;
export const newKeyId = () => `ak-${randomBytes(8).toString('hex')}`;

export const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** Constant-time comparison of a presented secret with a stored sha256 hex. */
export function matchesHash(secret: string, hashHex: string) {
  const a = Buffer.from(sha256(secret), 'hex');
  const b = Buffer.from(hashHex, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

const UNIT_MS: Record<string, number> = {
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

/** `30d`, `24h`, `1w`, `15m`, `30s` to milliseconds; undefined for anything else or zero. */
export function durationMs(s: string): number | undefined {
  const m = /^([0-9]{1,9})(s|m|h|d|w)$/.exec(s);
  if (!m) return undefined;
  const ms = Number(m[1]) * UNIT_MS[m[2]];
  return ms > 0 ? ms : undefined;
}

/** A JWT is three dot-separated base64url parts; an API key never contains a dot. */
export const looksLikeJwt = (s: string) => /^[\w-]+\.[\w-]+\.[\w-]+$/.test(s);
