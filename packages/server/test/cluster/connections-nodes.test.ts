// A function bound to a user's OAuth2 connection, placed across the nodes of a cluster (decision 101): with minScale 2
// its replica slots are on both servers, and each replica reads a fresh token of its user from its own node's file
// through several token lifetimes. The provider (oidc-provider on loopback) rotates the refresh token at every
// refresh and revokes the grant of one used twice, so two servers refreshing the same connection would end the grant:
// every refresh the provider answered is one the record counts, and none is refused. A grant the user revokes stops
// the replicas on both nodes with §7's answer; connecting again brings them back. A second tenant reaches neither the
// connection nor the function through any server.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { REFRESH_FAILED } from '../../src/kinds/oauth2.js';
import { seedNodeCache } from '../../src/test-support/dependency-cache.js';
import { startTestProvider, TENANT_CLIENT, type TestProvider } from '../../src/test-support/oidc-provider.js';
import { newTenant, type Tenant } from '../../src/test-support/tenants.js';
import { berth } from '../berth-cli.js';
import { inReplica, MAIL_TEMPLATE, REPO } from '../oauth/support.js';
import { type Proc, sleep, useCluster } from './cluster-support.js';

const TOKEN_TTL_S = 4;
const FN = 'mail-frank';

describe('a function bound to an OAuth2 connection, placed across the nodes of a cluster', () => {
  const cluster = useCluster(['node-a', 'node-b'], {
    prefix: 'connections-nodes',
    env: { BERTH_OUTBOUND_ALLOW_CIDRS: '127.0.0.0/8', BERTH_LOG_LEVEL: 'info' },
  });
  const { api } = cluster;
  let idp: TestProvider;
  let work: string;
  let tenant: Tenant;

  before(async () => {
    idp = await startTestProvider({
      redirectUris: ['http://127.0.0.1:1/callback'],
      accessTokenTtlS: TOKEN_TTL_S,
    });
    work = mkdtempSync(join(tmpdir(), 'berth-connections-nodes-'));
    tenant = await newTenant(cluster.server(cluster.node('node-a')), 'tenant-connections');
  });
  after(async () => {
    await idp?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  const fn = async (p: Proc, key = cluster.key) => (await api(p, `/functions/${FN}`, { key })).json();
  const rotations = async (p: Proc) =>
    (await (await api(p, `/integrations/connections/${FN}`)).json()).token?.rotations ?? 0;
  /** The token the function's replica on `p`'s node reads now: whose, and whether it is still valid. */
  const held = async (p: Proc) => {
    const r = await inReplica(
      { url: p.url, dataDir: p.dir },
      cluster.key,
      'default',
      FN,
      'cat "$BL_CONNECTION_MAIL_FRANK_TOKEN_FILE"',
    );
    assert.equal(r.code, 0, r.out);
    const claims = JSON.parse(Buffer.from(r.out.trim().split('.')[1] ?? '', 'base64url').toString() || '{}');
    return { email: claims.email as string, fresh: claims.exp * 1000 > Date.now(), token: r.out.trim() };
  };

  it('places the replicas of a function bound to a connection on both nodes', async () => {
    const [a, b] = [cluster.node('node-a'), cluster.node('node-b')];
    const conn = await api(b, `/integrations/connections/${FN}`, {
      method: 'PUT',
      json: {
        metadata: { name: FN },
        spec: {
          integration: 'oauth2',
          config: { tokenUrl: idp.tokenUrl },
          secret: {
            CLIENT_ID: TENANT_CLIENT.id,
            CLIENT_SECRET: TENANT_CLIENT.secret,
            REFRESH_TOKEN: await idp.issueRefreshToken('frank'),
          },
        },
      },
    });
    assert.equal(conn.status, 200, await conn.text());
    const dir = join(work, FN);
    cpSync(MAIL_TEMPLATE, dir, { recursive: true });
    writeFileSync(join(dir, 'berth.toml'), `type = "function"\nname = "${FN}"\n[runtime]\nmemory = 256\n`);
    for (const p of cluster.procs) seedNodeCache(p.dir, 'default', dir, REPO);
    const d = await berth({ url: a.url, adminKey: cluster.key }, ['deploy', dir]);
    assert.equal(d.code, 0, d.out);
    const cur = await fn(a);
    const put = await api(a, `/functions/${FN}`, {
      method: 'PUT',
      json: {
        metadata: { name: FN },
        spec: {
          ...cur.spec,
          integrationConnections: [FN],
          runtime: { ...cur.spec.runtime, minScale: 2, memory: 256 },
        },
      },
    });
    assert.equal(put.status, 200, await put.text());
    let last: unknown;
    for (let i = 0; i < 1200; i++) {
      const o = await fn(b);
      const nodes: string[] = o.replicaNodes ?? [];
      const list = await cluster.nodes(b);
      const serving = list
        .filter((x) => (x.serving ?? []).includes(`Function/default/${FN}`))
        .map((x) => x.id);
      last = { status: o.status, nodes, serving, events: o.events?.slice(-2) };
      assert.notEqual(o.status, 'FAILED', JSON.stringify(last));
      if (
        o.status === 'DEPLOYED' &&
        new Set(nodes).size === 2 &&
        serving.length === 2 &&
        o.spec.integrationConnections?.length
      )
        return;
      await sleep(100);
    }
    assert.fail(`the function's replicas never ran on both nodes: ${JSON.stringify(last)}`);
  });

  it("each node's replica reads a fresh token of its user through several lifetimes, refreshed once for the cluster", async () => {
    const [a, b] = [cluster.node('node-a'), cluster.node('node-b')];
    const start = { refreshed: idp.counts.refreshed, rotations: await rotations(a) };
    const seen = new Set<string>();
    // Three lifetimes: each server holds the connection and would refresh it ahead of expiry on its own.
    const until = Date.now() + 3 * TOKEN_TTL_S * 1000;
    while (Date.now() < until) {
      for (const p of [a, b]) {
        let t = await held(p);
        // Read just as the file is renamed over: a fresh one follows within a moment.
        for (let i = 0; i < 10 && !t.fresh; i++) {
          await sleep(100);
          t = await held(p);
        }
        assert.deepEqual(
          [t.email, t.fresh],
          ['frank@example.test', true],
          `${p.id}'s replica holds a fresh token`,
        );
        seen.add(t.token);
      }
      await sleep(500);
    }
    assert.ok(seen.size >= 3, `the tokens were refreshed while held (${seen.size} seen)`);
    const refreshed = idp.counts.refreshed - start.refreshed;
    const rotated = (await rotations(b)) - start.rotations;
    assert.ok(refreshed >= 2, `refreshed ${refreshed} times`);
    assert.equal(refreshed, rotated, 'every refresh the provider answered is the one the record counts');
    assert.ok(
      refreshed <= 3 * 2 + 1,
      `one refresh per lifetime for the cluster, not one per server (${refreshed} in three lifetimes)`,
    );
    assert.equal(idp.counts.refused, 0, 'no refresh token was used twice');
  });

  it("a grant revoked at the provider stops the replicas on every node with §7's words; connecting again brings them back", async () => {
    const [a, b] = [cluster.node('node-a'), cluster.node('node-b')];
    await idp.revoke('frank');
    let o: any;
    for (let i = 0; i < 200; i++) {
      o = await fn(a);
      if (o.status === 'FAILED') break;
      await sleep(100);
    }
    assert.equal(o.status, 'FAILED', JSON.stringify(o.events?.slice(-2)));
    assert.ok(o.events.at(-1).message.startsWith(REFRESH_FAILED), o.events.at(-1).message);
    for (let i = 0; i < 100; i++) {
      const list = await cluster.nodes(a);
      if (!list.some((x) => (x.serving ?? []).includes(`Function/default/${FN}`))) break;
      await sleep(100);
    }
    for (const p of [a, b]) {
      const list = await cluster.nodes(p);
      assert.ok(
        !list.some((x) => (x.serving ?? []).includes(`Function/default/${FN}`)),
        `no node serves it: ${JSON.stringify(list.map((x) => [x.id, x.serving]))}`,
      );
      const r = await fetch(`${p.url}/run/default/functions/${FN}/health`, {
        headers: { authorization: `Bearer ${cluster.key}` },
      });
      const problem = await r.json();
      assert.equal(r.status, 503, `${p.id}: ${JSON.stringify(problem)}`);
      assert.equal(problem.type, 'https://berth.dev/problems/oauth-refresh-failed', `${p.id}`);
    }
    // The user connects again: the connection gets a new refresh token, and both nodes serve fresh tokens again.
    const cur = await (await api(b, `/integrations/connections/${FN}?show_secrets=true`)).json();
    const again = await api(b, `/integrations/connections/${FN}`, {
      method: 'PUT',
      json: {
        metadata: { name: FN },
        spec: {
          ...cur.spec,
          secret: { ...cur.spec.secret, REFRESH_TOKEN: await idp.issueRefreshToken('frank') },
        },
      },
    });
    assert.equal(again.status, 200, await again.text());
    for (let i = 0; i < 600; i++) {
      o = await fn(a);
      const list = await cluster.nodes(a);
      const serving = list.filter((x) => (x.serving ?? []).includes(`Function/default/${FN}`));
      if (o.status === 'DEPLOYED' && serving.length === 2) break;
      await sleep(100);
    }
    assert.equal(o.status, 'DEPLOYED', JSON.stringify(o.events?.slice(-2)));
    for (const p of [a, b]) {
      const t = await held(p);
      assert.deepEqual(
        [t.email, t.fresh],
        ['frank@example.test', true],
        `${p.id}'s replica after connecting again`,
      );
    }
  });

  it('a second tenant reaches neither the connection nor the function through any server', async () => {
    for (const p of cluster.procs) {
      const c = await api(p, `/integrations/connections/${FN}`, { key: tenant.key });
      assert.equal(c.status, 404, `${p.id}: the connection`);
      assert.equal(
        (await api(p, `/functions/${FN}`, { key: tenant.key })).status,
        404,
        `${p.id}: the function`,
      );
      const r = await fetch(`${p.url}/run/default/functions/${FN}/health`, {
        headers: { authorization: `Bearer ${tenant.key}` },
      });
      assert.ok([401, 403, 404].includes(r.status), `${p.id}: the function's address answered ${r.status}`);
    }
  });
});
