// The server's own JWT signing key: an ES256 pair made once and kept in <dataDir>/jwt-signing.jwk (0600).
// Tokens are issued by the token endpoint and verified locally; the public half is served as a JWKS.
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
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

async function loadOrCreate(file: string): Promise<JWK> {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as JWK;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const { privateKey } = await generateKeyPair(JWT_ALG, { extractable: true });
  const jwk = await exportJWK(privateKey);
  jwk.kid = await calculateJwkThumbprint(jwk);
  jwk.alg = JWT_ALG;
  jwk.use = 'sig';
  // 'wx': two servers starting on one data dir must not each write a different key.
  try {
    writeFileSync(file, `${JSON.stringify(jwk)}\n`, { mode: 0o600, flag: 'wx' });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return JSON.parse(readFileSync(file, 'utf8')) as JWK;
    throw e;
  }
  return jwk;
}

export async function loadSigningKey(dataDir: string): Promise<SigningKey> {
  const priv = await loadOrCreate(join(dataDir, SIGNING_KEY_FILE));
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
