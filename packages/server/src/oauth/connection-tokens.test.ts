// OAuth2 connections against a real OpenID provider (oidc-provider on loopback): the refresh-token grant as each
// client authentication sends it, the rotated refresh token stored sealed and used next (the provider refuses a
// reused one and revokes the grant), a revoked grant reported with the words of §7 until the connection is given a
// new refresh token, tokens kept fresh in their file while held, a restart going on from the stored tokens, and no
// token in the connection's answer, its record in clear or the log.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { SecretBox } from '../crypto/secret-box.js';
import { CONNECTION_TOKEN_KIND, integrationConnection } from '../kinds/integration-connection.js';
import { REFRESH_FAILED } from '../kinds/oauth2.js';
import { Outbound } from '../outbound/index.js';
import { Resources } from '../store/resources.js';
import { SqliteStore } from '../store/sqlite.js';
import {
  BASIC_CLIENT,
  MAIL_SCOPE,
  startTestProvider,
  TENANT_CLIENT,
  type TestProvider,
} from '../test-support/oidc-provider.js';
import { ConnectionTokenFailed, ConnectionTokens } from './connection-tokens.js';
import { ACCESS_TOKEN_FILE } from './token-files.js';

const WS = 'tenant';
const admin = { workspace: WS, parents: [], actor: 'test', role: 'admin' as const };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('OAuth2 connection tokens', () => {
  let idp: TestProvider;
  let dir: string;
  let store: SqliteStore;
  let resources: Resources;
  let logs: Buffer[];
  let tokens: ConnectionTokens;
  const outbound = new Outbound({ allowCidrs: ['127.0.0.0/8'] });
  /** A server's tokens: another server of the same cluster when given its own data dir. */
  const make = (dataDir = dir) => {
    const logStream = new PassThrough();
    logStream.on('data', (c: Buffer) => logs.push(c));
    return new ConnectionTokens({
      resources,
      outbound,
      dataDir,
      logger: pino({ level: 'debug' }, logStream),
    });
  };
  const connect = async (
    name: string,
    refreshToken: string,
    client: { id: string; secret: string } = TENANT_CLIENT,
    config: Record<string, unknown> = {},
  ) =>
    resources.replace(integrationConnection, admin, name, {
      metadata: { name },
      spec: {
        integration: 'oauth2',
        config: { tokenUrl: idp.tokenUrl, ...config },
        secret: { CLIENT_ID: client.id, CLIENT_SECRET: client.secret, REFRESH_TOKEN: refreshToken },
      },
    });
  const record = async (name: string) =>
    (await store.get({ kind: CONNECTION_TOKEN_KIND, workspace: WS, parent: name, name: 'oauth2' }))?.body;
  const exists = async (ws: string) => {
    try {
      readFileSync(join(tokens.dirOf(ws, 'alice-mail'), ACCESS_TOKEN_FILE));
      return true;
    } catch {
      return false;
    }
  };
  const view = async (name: string) =>
    resources.view(integrationConnection, (await resources.get(integrationConnection, WS, [], name))!);

  before(async () => {
    idp = await startTestProvider({ redirectUris: ['http://127.0.0.1:1/callback'], accessTokenTtlS: 3 });
    dir = mkdtempSync(join(tmpdir(), 'berth-oauth-'));
    store = new SqliteStore(join(dir, 'berth.db'));
    resources = new Resources(store, [integrationConnection], new SecretBox(randomBytes(32)), {
      regions: ['local'],
      outbound,
    });
    logs = [];
    tokens = make();
    tokens.start();
  });
  after(async () => {
    tokens.close();
    await idp.close();
    await store.close();
    await outbound.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('refreshes with client_secret_post, stores each rotated refresh token sealed and uses it next', async () => {
    const first = await idp.issueRefreshToken('alice');
    await connect('alice-mail', first);
    const t1 = await tokens.token(WS, 'alice-mail');
    const claims = JSON.parse(Buffer.from(t1.accessToken.split('.')[1], 'base64url').toString());
    assert.equal(claims.email, 'alice@example.test');
    assert.equal(claims.scope, MAIL_SCOPE);
    const rec1 = (await record('alice-mail')) ?? {};
    assert.match(rec1.refreshToken, /^enc:v1:/, 'the rotated refresh token is stored sealed');
    assert.match(rec1.accessToken, /^enc:v1:/);
    // Held while fresh; forced, the stored (rotated) refresh token is used: the provider would refuse the first one
    // again and revoke the whole grant.
    assert.equal((await tokens.token(WS, 'alice-mail')).accessToken, t1.accessToken);
    const t2 = await tokens.token(WS, 'alice-mail', true);
    assert.notEqual(t2.accessToken, t1.accessToken);
    assert.equal(idp.counts.refused, 0);
    // How long a refresh takes (the provider on loopback: the grant, sealing, one store transaction). Reported.
    const took: number[] = [];
    for (let i = 0; i < 10; i++) {
      const t0 = performance.now();
      await tokens.token(WS, 'alice-mail', true);
      took.push(performance.now() - t0);
    }
    took.sort((a, b) => a - b);
    console.log(
      `refresh: median ${took[5].toFixed(1)} ms, slowest ${took[9].toFixed(1)} ms (10 forced refreshes)`,
    );
    const v = await view('alice-mail');
    assert.equal(v.token.state, 'VALID');
    assert.equal(v.token.rotations, 12);
    assert.equal(v.token.scope, MAIL_SCOPE);
    assert.ok(Date.parse(v.token.validUntil) > Date.now());
    const shown = JSON.stringify(v) + JSON.stringify(await record('alice-mail'));
    for (const secret of [first, t1.accessToken, t2.accessToken, TENANT_CLIENT.secret])
      assert.ok(!shown.includes(secret), 'no token in clear in the answer or the record');
  });

  it('authenticates with client_secret_basic when the connection says so', async () => {
    await connect('basic-mail', await idp.issueRefreshToken('carol', BASIC_CLIENT), BASIC_CLIENT, {
      clientAuth: 'client_secret_basic',
    });
    const t = await tokens.token(WS, 'basic-mail');
    assert.ok(t.accessToken);
    assert.equal(idp.lastClientAuth(), 'basic');
    await tokens.token(WS, 'alice-mail', true);
    assert.equal(idp.lastClientAuth(), 'post', 'client_secret_post is the default, as §5 step 4 sends it');
  });

  it("another workspace with a connection of the same name gets its own grant, record and file, never the first one's", async () => {
    const OTHER = 'intruder';
    const intruder = { ...admin, workspace: OTHER };
    // Not there: the first workspace's connection is not found by its name from another one.
    await assert.rejects(tokens.token(OTHER, 'alice-mail'), /does not exist/);
    await resources.replace(integrationConnection, intruder, 'alice-mail', {
      metadata: { name: 'alice-mail' },
      spec: {
        integration: 'oauth2',
        config: { tokenUrl: idp.tokenUrl },
        secret: {
          CLIENT_ID: TENANT_CLIENT.id,
          CLIENT_SECRET: TENANT_CLIENT.secret,
          REFRESH_TOKEN: await idp.issueRefreshToken('mallory'),
        },
      },
    });
    await tokens.hold('wl-intruder', OTHER, ['alice-mail']);
    await tokens.hold('wl-alice', WS, ['alice-mail']);
    const email = (t: string) => JSON.parse(Buffer.from(t.split('.')[1], 'base64url').toString()).email;
    const file = (ws: string) =>
      readFileSync(join(tokens.dirOf(ws, 'alice-mail'), ACCESS_TOKEN_FILE), 'utf8');
    assert.notEqual(tokens.dirOf(OTHER, 'alice-mail'), tokens.dirOf(WS, 'alice-mail'));
    assert.equal(email(file(OTHER)), 'mallory@example.test');
    assert.equal(email(file(WS)), 'alice@example.test');
    assert.equal(email((await tokens.token(OTHER, 'alice-mail')).accessToken), 'mallory@example.test');
    assert.equal(email((await tokens.token(WS, 'alice-mail')).accessToken), 'alice@example.test');
    // The intruder's connection going takes its own tokens only.
    await resources.delete(integrationConnection, intruder, 'alice-mail');
    for (let i = 0; i < 50 && (await exists(OTHER)); i++) await sleep(20);
    assert.equal(await exists(OTHER), false);
    assert.equal(email(file(WS)), 'alice@example.test');
    assert.equal((await view('alice-mail')).token.state, 'VALID');
    tokens.release('wl-intruder');
    tokens.release('wl-alice');
  });

  it('a revoked grant fails with the words of §7 until the connection gets a new refresh token', async () => {
    await connect('dave-mail', await idp.issueRefreshToken('dave'));
    await tokens.token(WS, 'dave-mail');
    await idp.revoke('dave');
    const err = await tokens.token(WS, 'dave-mail', true).catch((e) => e);
    assert.ok(err instanceof ConnectionTokenFailed, String(err));
    assert.ok(err.message.startsWith(REFRESH_FAILED), err.message);
    assert.match(err.message, /invalid_grant/);
    assert.match(err.message, /access_type=offline/);
    const v = await view('dave-mail');
    assert.equal(v.token.state, 'FAILED');
    assert.match(v.token.lastError, /invalid_grant/);
    assert.equal(await tokens.failure(WS, 'dave-mail'), err.message);
    // Asked again, the provider is not: the refusal stands for this connection as it is.
    const refused = idp.counts.refused;
    await assert.rejects(tokens.token(WS, 'dave-mail', true), ConnectionTokenFailed);
    assert.equal(idp.counts.refused, refused);
    // The user connects again: the connection is replaced with the new refresh token.
    await connect('dave-mail', await idp.issueRefreshToken('dave'));
    assert.equal(await tokens.failure(WS, 'dave-mail'), undefined);
    assert.ok((await tokens.token(WS, 'dave-mail')).accessToken);
    assert.equal((await view('dave-mail')).token.state, 'VALID');
  });

  it('keeps a held token fresh in its file before it expires, and a restart goes on from the stored tokens', async () => {
    await connect('erin-mail', await idp.issueRefreshToken('erin'));
    await tokens.hold('wl-1', WS, ['erin-mail']);
    const file = join(tokens.dirOf(WS, 'erin-mail'), ACCESS_TOKEN_FILE);
    const seen = new Set([readFileSync(file, 'utf8')]);
    // A 3 s token is replaced a second before it expires: within 6 s, at least two more.
    for (let i = 0; i < 60 && seen.size < 3; i++) {
      await sleep(100);
      seen.add(readFileSync(file, 'utf8'));
    }
    assert.ok(seen.size >= 3, `the token file changed ${seen.size - 1} times`);
    for (const t of seen) {
      const exp = JSON.parse(Buffer.from(t.split('.')[1], 'base64url').toString()).exp;
      assert.ok(exp * 1000 > Date.now() - 3000);
    }
    // The server stops between two refreshes (what kill -9 leaves is the store) and a new one starts.
    tokens.close();
    const refused = idp.counts.refused;
    tokens = make();
    tokens.start();
    await sleep(3000); // the held access token expires
    const fresh = await tokens.token(WS, 'erin-mail');
    assert.ok(!seen.has(fresh.accessToken));
    assert.equal(idp.counts.refused, refused, 'the stored rotated refresh token was the one used');
  });

  it('a 401 the proxy saw refreshes once, unless the token was just refreshed', async () => {
    await connect('gina-mail', await idp.issueRefreshToken('gina'));
    // A clock of its own, moved past the quiet time instead of waiting for it.
    let skew = 0;
    const own = new ConnectionTokens({ resources, outbound, dataDir: dir, now: () => Date.now() + skew });
    try {
      const first = await own.token(WS, 'gina-mail');
      const rotations = async () => (await record('gina-mail'))?.rotations ?? 0;
      const before = await rotations();
      own.unauthorized(`${WS}/gina-mail`);
      await sleep(300);
      assert.equal(await rotations(), before, 'a token refreshed under 5 s ago is not refreshed again');
      skew = 6_000;
      own.unauthorized(`${WS}/gina-mail`);
      for (let i = 0; i < 50 && (await rotations()) === before; i++) await sleep(50);
      assert.equal(await rotations(), before + 1, 'refreshed once');
      assert.notEqual((await own.token(WS, 'gina-mail')).accessToken, first.accessToken);
      // An id naming no connection of this workspace does nothing (and throws nothing).
      own.unauthorized('nobody/gina-mail');
      own.unauthorized('garbage');
    } finally {
      own.close();
    }
  });

  it('a refresh that failed on a server cut from the provider does not put back the refresh token another server rotated meanwhile', async () => {
    await connect('hana-mail', await idp.issueRefreshToken('hana'));
    await tokens.token(WS, 'hana-mail');
    const before = (await record('hana-mail'))?.rotations;
    // A deposed leader still refreshing: it claimed the refresh, then its call to the provider hangs past its claim
    // (it is cut off) and fails, and in between the new leader (`tokens`) took the lapsed claim and rotated the
    // refresh token.
    const cut = new ConnectionTokens({
      resources,
      dataDir: dir,
      claimMs: 300,
      outbound: {
        fetch: async () => {
          await tokens.token(WS, 'hana-mail', true);
          throw new Error('connect ETIMEDOUT');
        },
      },
    });
    try {
      const got = await cut.token(WS, 'hana-mail', true);
      assert.equal((await record('hana-mail'))?.rotations, before + 1, "the new leader's rotation is kept");
      assert.equal(
        got.accessToken,
        (await tokens.token(WS, 'hana-mail')).accessToken,
        'the record it wrote is used',
      );
    } finally {
      cut.close();
    }
    // The refresh token stored is the provider's current one: the next refresh is not refused (a reused one would be,
    // and the provider would revoke the whole grant).
    const refused = idp.counts.refused;
    await tokens.token(WS, 'hana-mail', true);
    assert.equal(idp.counts.refused, refused);
    assert.equal((await view('hana-mail')).token.state, 'VALID');
  });

  it('two servers refreshing one connection at once ask the provider once and both get the new token', async () => {
    await connect('ivan-mail', await idp.issueRefreshToken('ivan'));
    const otherDir = mkdtempSync(join(tmpdir(), 'berth-oauth-other-'));
    const other = make(otherDir);
    other.start();
    try {
      const first = await tokens.token(WS, 'ivan-mail');
      const [refreshed, refused] = [idp.counts.refreshed, idp.counts.refused];
      // Both servers see a 401 at the same moment. The provider rotates refresh tokens and revokes the grant of one
      // used twice: two refreshes from the same record would end the user's grant.
      const [a, b] = await Promise.all([
        tokens.token(WS, 'ivan-mail', true),
        other.token(WS, 'ivan-mail', true),
      ]);
      assert.equal(idp.counts.refreshed - refreshed, 1, 'one refresh at the provider');
      assert.equal(idp.counts.refused, refused, 'no refresh token used twice');
      assert.equal(a.accessToken, b.accessToken);
      assert.notEqual(a.accessToken, first.accessToken);
      assert.equal((await view('ivan-mail')).token.state, 'VALID');
      assert.equal((await record('ivan-mail'))?.claim, undefined, 'the claim ends with the refresh');
    } finally {
      other.close();
      rmSync(otherDir, { recursive: true, force: true });
    }
  });

  it('a server holding a connection writes the token another server refreshed into its own file at once', async () => {
    await connect('jude-mail', await idp.issueRefreshToken('jude'));
    const otherDir = mkdtempSync(join(tmpdir(), 'berth-oauth-other-'));
    const other = make(otherDir);
    other.start();
    try {
      await other.hold('wl-jude', WS, ['jude-mail']);
      const file = join(other.dirOf(WS, 'jude-mail'), ACCESS_TOKEN_FILE);
      const before = readFileSync(file, 'utf8');
      const fresh = await tokens.token(WS, 'jude-mail', true);
      assert.notEqual(fresh.accessToken, before);
      let now = '';
      for (let i = 0; i < 40 && now !== fresh.accessToken; i++) {
        now = readFileSync(file, 'utf8');
        if (now !== fresh.accessToken) await sleep(25);
      }
      assert.equal(now, fresh.accessToken, "the other server's file holds the new token");
      other.release('wl-jude');
    } finally {
      other.close();
      rmSync(otherDir, { recursive: true, force: true });
    }
  });

  it('never logs a token', () => {
    const text = Buffer.concat(logs).toString();
    assert.match(text, /oauth2 access token refreshed/);
    assert.doesNotMatch(text, /eyJ/, 'no JWT in the log');
    assert.ok(!text.includes(TENANT_CLIENT.secret));
  });
});
