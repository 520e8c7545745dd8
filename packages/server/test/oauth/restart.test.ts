// `berth serve` killed with SIGKILL between two refreshes of a user's OAuth2 connection, started again on the same
// data dir: nothing is lost. The provider rotates the refresh token at every refresh and refuses (and revokes the
// grant for) one used twice, so a server that lost the rotated token, or used the spec's first one again, would be
// refused; instead the user's MCP server holds a fresh token of its user again, refreshed from the stored one. (The
// token file, not the proxy: this test needs no upstream namespace, so it does not wait on the egress tests' lock.)
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { seedNodeCache } from '../../src/test-support/dependency-cache.js';
import { startTestProvider, TENANT_CLIENT } from '../../src/test-support/oidc-provider.js';
import { OUTBOUND_LOOPBACK } from '../../src/test-support/server.js';
import { berth } from '../berth-cli.js';
import { removeAllSandboxes, startSandboxServer } from '../sandboxes/support.js';
import { serve, stopped } from '../serve-process.js';
import { inReplica, MAIL_TEMPLATE, REPO, sleep } from './support.js';
import { removeDirLater } from '../../src/test-support/sandboxes.js';

const TOKEN_TTL_S = 4;

test('a kill -9 of the server between two refreshes loses no rotated refresh token', async () => {
  const idp = await startTestProvider({
    redirectUris: ['http://127.0.0.1:1/callback'],
    accessTokenTtlS: TOKEN_TTL_S,
  });
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-oauth-restart-'));
  const work = mkdtempSync(join(tmpdir(), 'berth-oauth-restart-src-'));
  let server: ChildProcess | undefined;
  try {
    // Deployed by an in-process server on the data dir (as test/agents/restart.test.ts does), then served by
    // `berth serve`, which re-adopts the replica.
    const env = { ...OUTBOUND_LOOPBACK, BERTH_LOG_LEVEL: 'info' };
    const builder = await startSandboxServer(env, dataDir);
    const put = async (path: string, json: unknown) => {
      const res = await builder.api(path, { method: 'PUT', json });
      assert.equal(res.status, 200, await res.text());
    };
    await put('/integrations/connections/mail-frank', {
      metadata: { name: 'mail-frank' },
      spec: {
        integration: 'oauth2',
        config: { tokenUrl: idp.tokenUrl },
        secret: {
          CLIENT_ID: TENANT_CLIENT.id,
          CLIENT_SECRET: TENANT_CLIENT.secret,
          REFRESH_TOKEN: await idp.issueRefreshToken('frank'),
        },
      },
    });
    const dir = join(work, 'mail-frank');
    cpSync(MAIL_TEMPLATE, dir, { recursive: true });
    writeFileSync(
      join(dir, 'berth.toml'),
      'type = "function"\nname = "mail-frank"\n[runtime]\nmemory = 256\n',
    );
    seedNodeCache(dataDir, 'default', dir, REPO);
    const d = await berth(builder, ['deploy', dir]);
    assert.equal(d.code, 0, d.out);
    const cur = await (await builder.api('/functions/mail-frank')).json();
    await put('/functions/mail-frank', {
      metadata: { name: 'mail-frank' },
      spec: { ...cur.spec, integrationConnections: ['mail-frank'] },
    });
    for (let i = 0; i < 600; i++) {
      const o = await (await builder.api('/functions/mail-frank')).json();
      if (o.status === 'DEPLOYED' && o.events.at(-1).message.startsWith('deployed')) break;
      assert.notEqual(o.status, 'FAILED', o.events.at(-1).message);
      await sleep(100);
    }
    await builder.close();

    const adminKey = readFileSync(join(dataDir, 'admin.key'), 'utf8').trim();
    let started = await serve(dataDir, env);
    server = started.child;
    let url = started.url;
    /** The token the replica reads now: whose, and until when. */
    const held = async () => {
      const r = await inReplica(
        { url, dataDir },
        adminKey,
        'default',
        'mail-frank',
        'cat "$BL_CONNECTION_MAIL_FRANK_TOKEN_FILE"',
      );
      const claims = JSON.parse(
        Buffer.from(r.out.trim().split('.')[1] ?? '', 'base64url').toString() || '{}',
      );
      return { email: claims.email, fresh: claims.exp * 1000 > Date.now(), token: r.out.trim() };
    };
    const rotations = async () =>
      (
        await (
          await fetch(`${url}/v0/integrations/connections/mail-frank`, {
            headers: { authorization: `Bearer ${adminKey}` },
          })
        ).json()
      ).token?.rotations ?? 0;
    // The builder's last token may have expired while this server started: its first refresh comes at once, so wait
    // for it (bounded) before the kill this test is about.
    let first = await held();
    for (let i = 0; i < 100 && !first.fresh; i++) {
      await sleep(100);
      first = await held();
    }
    assert.deepEqual([first.email, first.fresh], ['frank@example.test', true]);
    // Just after a refresh: kill -9, so the next one falls to the next server.
    const start = await rotations();
    for (let i = 0; i < 200 && (await rotations()) === start; i++) await sleep(50);
    const beforeKill = await rotations();
    assert.ok(beforeKill > start, 'refreshes happen while served');
    server?.kill('SIGKILL');
    await stopped(server as ChildProcess);
    await sleep(TOKEN_TTL_S * 1000 + 500); // the access token the replica holds expires meanwhile

    started = await serve(dataDir, env);
    server = started.child;
    url = started.url;
    let again = { email: '', fresh: false, token: '' };
    for (let i = 0; i < 100 && !again.fresh; i++) {
      again = await held().catch(() => again);
      if (!again.fresh) await sleep(200);
    }
    assert.deepEqual(
      [again.email, again.fresh],
      ['frank@example.test', true],
      'the replica holds a fresh token again',
    );
    assert.notEqual(again.token, first.token);
    for (let i = 0; i < 200 && (await rotations()) <= beforeKill; i++) await sleep(50);
    assert.ok((await rotations()) > beforeKill, 'the refreshes go on from the stored refresh token');
    assert.equal(idp.counts.refused, 0, 'no refresh token was lost or used twice');
  } finally {
    server?.kill('SIGKILL');
    if (server) await stopped(server);
    await removeAllSandboxes(dataDir);
    removeDirLater(dataDir);
    rmSync(work, { recursive: true, force: true });
    await idp.close();
  }
});
