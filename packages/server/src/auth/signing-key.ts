// The server's own JWT signing key: an ES256 pair made once and kept in <dataDir>/jwt-signing.jwk (0600).
// Tokens are issued by the token endpoint and verified locally; the public half is served as a JWKS.
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SecretBox } from '../crypto/secret-box.js';
import { type ResourceKey, type Store, StoreError } from '../store/store.js';
import {
  calculateJwkThumbprint,
  exportJWK,
  generateKeyPair,
  importJWK,
  type JWK,
  type JWTPayload,
  jwtVerify,
  SignJWT,
} from 'jose';

export const JWT_ALG = 'ES256';
export const JWT_AUDIENCE = 'berth';
/** One hour: long enough for a batch of calls, short enough that a leaked token ages out soon. */
export const ACCESS_TOKEN_TTL_S = 3600;
export const SIGNING_KEY_FILE = 'jwt-signing.jwk';

export interface TokenClaims extends JWTPayload {
  sub: string;
  workspace: string;
}

export interface SigningKey {
  /** Public JWK set for `/.well-known/jwks.json`. */
  jwks(): { keys: JWK[] };
  sign(claims: { sub: string; workspace: string }, issuer: string, nowS?: number): Promise<string>;
  /** Throws when the signature, issuer, audience or expiry is wrong. */
  verify(token: string, issuer: string): Promise<TokenClaims>;
}

async function newJwk(): Promise<JWK> {
  const { privateKey } = await generateKeyPair(JWT_ALG, { extractable: true });
  const jwk = await exportJWK(privateKey);
  jwk.kid = await calculateJwkThumbprint(jwk);
  jwk.alg = JWT_ALG;
  jwk.use = 'sig';
  return jwk;
}

function readJwk(file: string): JWK | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as JWK;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    return undefined;
  }
}

async function loadOrCreate(file: string): Promise<JWK> {
  const found = readJwk(file);
  if (found) return found;
  const jwk = await newJwk();
  // 'wx': two servers starting on one data dir must not each write a different key.
  try {
    writeFileSync(file, `${JSON.stringify(jwk)}\n`, { mode: 0o600, flag: 'wx' });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return JSON.parse(readFileSync(file, 'utf8')) as JWK;
    throw e;
  }
  return jwk;
}

/** Where a cluster keeps its one signing key (sealed with the master key), in the global pseudo-workspace. */
const SHARED_KEY: ResourceKey = { kind: 'SigningKey', workspace: '_', parent: '', name: 'jwt' };

/**
 * The signing key every server of a cluster signs and verifies with: kept in the shared store, sealed. The first
 * server to start puts in the key of its data dir when it has one (tokens it issued alone stay valid), else a new one.
 */
export async function loadSharedSigningKey(
  store: Store,
  box: SecretBox,
  dataDir: string,
): Promise<SigningKey> {
  let rec = await store.get(SHARED_KEY);
  if (!rec) {
    const jwk = readJwk(join(dataDir, SIGNING_KEY_FILE)) ?? (await newJwk());
    try {
      await store.write([{ op: 'create', key: SHARED_KEY, body: { jwk: box.seal(JSON.stringify(jwk)) } }]);
    } catch (e) {
      if (!(e instanceof StoreError && e.reason === 'exists')) throw e;
    }
    rec = await store.get(SHARED_KEY);
  }
  return signingKeyOf(JSON.parse(box.open(String(rec?.body.jwk))) as JWK);
}

export async function loadSigningKey(dataDir: string): Promise<SigningKey> {
  return signingKeyOf(await loadOrCreate(join(dataDir, SIGNING_KEY_FILE)));
}

async function signingKeyOf(priv: JWK): Promise<SigningKey> {
  const { d: _d, ...pub } = priv;
  const privateKey = await importJWK(priv, JWT_ALG);
  const publicKey = await importJWK(pub, JWT_ALG);
  return {
    jwks: () => ({ keys: [{ ...pub }] }),
    async sign(claims, issuer, nowS = Math.floor(Date.now() / 1000)) {
      return new SignJWT({ workspace: claims.workspace })
        .setProtectedHeader({ alg: JWT_ALG, kid: pub.kid, typ: 'JWT' })
        .setIssuer(issuer)
        .setSubject(claims.sub)
        .setAudience(JWT_AUDIENCE)
        .setIssuedAt(nowS)
        .setExpirationTime(nowS + ACCESS_TOKEN_TTL_S)
        .setJti(randomBytes(12).toString('base64url'))
        .sign(privateKey);
    },
    async verify(token, issuer) {
      const { payload } = await jwtVerify(token, publicKey, {
        issuer,
        audience: JWT_AUDIENCE,
        algorithms: [JWT_ALG],
        requiredClaims: ['sub', 'exp'],
      });
      if (typeof payload.workspace !== 'string') throw new Error('token has no workspace claim');
      return payload as TokenClaims;
    },
  };
}
