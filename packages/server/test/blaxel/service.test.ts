// The rest of the service's operations through the unmodified @blaxel/core generated client (decision 047): the
// server's catalogs, lists across parents, a model's revisions, a connection's model details, workspace users over
// Berth's invitations, leaving a workspace and a name's availability; and a second tenant reaching none of it.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runBlaxelScript } from '../../src/test-support/blaxel.js';
import { OUTBOUND_LOOPBACK, startTestServer, type TestServer } from '../../src/test-support/server.js';
import { newTenant, type Tenant } from '../../src/test-support/tenants.js';

const TEMPLATES = join(import.meta.dirname, '../../../../templates');

const SCRIPT = join(import.meta.dirname, 'service-client.mjs');
const TEAM = 'sdk-team';

/** An OpenAI-compatible provider on loopback: its model list is all the connection routes ask of it. */
function fakeProvider(): Promise<Server> {
  const srv = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.url === '/v1/models')
      return res.end(JSON.stringify({ data: [{ id: 'fake-1' }, { id: 'fake-2', owned_by: 'berth-test' }] }));
    res.statusCode = 404;
    res.end('{}');
  });
  return new Promise((r) => srv.listen(0, '127.0.0.1', () => r(srv)));
}

describe('@blaxel/core on the rest of the service’s operations', () => {
  let s: TestServer;
  let provider: Server;
  let beta: Tenant;
  let user: { id: string; key: string };
  const run = async (env: Record<string, string>, key?: string) =>
    JSON.parse(
      await runBlaxelScript(
        SCRIPT,
        { url: s.url, adminKey: key ?? s.adminKey },
        { BL_WORKSPACE: 'default', ...env },
      ),
    );
  const ok = async (r: Response) => {
    const body = await r.json();
    assert.ok(r.ok, `${r.status} ${JSON.stringify(body)}`);
    return body;
  };

  before(async () => {
    [s, provider] = await Promise.all([startTestServer({ ...OUTBOUND_LOOPBACK }), fakeProvider()]);
    beta = await newTenant(s, 'beta');
    const sa = await ok(
      await s.api('/service_accounts', { method: 'POST', json: { name: 'sdk-user', role: 'viewer' } }),
    );
    const key = await ok(
      await s.api(`/service_accounts/${sa.client_id}/api_keys`, { method: 'POST', json: {} }),
    );
    user = { id: sa.client_id, key: key.apiKey };
    await ok(await s.api('/workspaces', { method: 'POST', json: { name: TEAM } }));
  });
  after(async () => {
    await s?.close();
    provider?.close();
  });

  describe('catalogs, lists across parents, model revisions', () => {
    let r: any;
    before(async () => {
      const port = (provider.address() as AddressInfo).port;
      r = await run({ PHASE: 'catalog', PROVIDER_URL: `http://127.0.0.1:${port}` });
    });

    it('the hubs: MCP server templates of the catalog, and the base image a sandbox starts from', () => {
      assert.equal(r.mcpHub.status, 200, JSON.stringify(r.mcpHub.error));
      // Every template of the repository's catalog tagged `mcp`, the starter among them.
      const mcp = readdirSync(TEMPLATES)
        .map((d) => JSON.parse(readFileSync(join(TEMPLATES, d, 'template.json'), 'utf8')))
        .filter((t) => t.topics.includes('mcp'))
        .map((t) => [t.name, 'http-stream'])
        .sort();
      assert.ok(mcp.some(([n]) => n === 'mcp-typescript'));
      assert.deepEqual(r.mcpHub.data.map((d: any) => [d.name, d.transport]).sort(), mcp);
      assert.deepEqual(
        r.sandboxHub.data.map((d: any) => [d.name, d.image, d.memory]),
        [['base-image', 'blaxel/base-image:latest', 4096]],
      );
    });

    it('locations, configuration and public IPs name the served regions; an unknown region is a 400', () => {
      assert.deepEqual(r.locations.data, [
        { region: 'local', location: 'local', status: 'available', flavors: [{ name: 'cpu', type: 'cpu' }] },
      ]);
      assert.deepEqual(
        r.configuration.data.regions.map((x: any) => [x.name, x.egressAvailable]),
        [['local', false]],
      );
      assert.deepEqual(Object.keys(r.publicIps.data), ['local']);
      assert.deepEqual(r.publicIps.data.local.ipv4Cidrs, [], 'no egress gateway is configured');
      assert.equal(r.publicIpsOtherRegion.status, 400);
    });

    it('features: the enabled ones, one by key, and a 404 for a key the server does not know', () => {
      assert.equal(r.features.data.features.drives, true);
      assert.equal(r.features.data.features['egress-gateways'], undefined, 'off: not configured');
      assert.equal(r.feature.data.featureKey, 'drives');
      assert.equal(r.feature.data.enabled, true);
      assert.equal(r.unknownFeature.status, 404);
      assert.equal(r.unknownFeature.error.code, 404);
    });

    it("the changelog is Berth's own release notes, newest first", () => {
      const entries = r.changelog.data.entries;
      assert.ok(entries.length >= 2);
      assert.match(entries[0].date, /^\d{4}-\d{2}-\d{2}$/);
      assert.ok(entries.every((e: any, i: number) => i === 0 || e.date <= entries[i - 1].date));
      // The newest entry is CHANGELOG.md's first, as written there.
      const file = readFileSync(join(import.meta.dirname, '../../../../CHANGELOG.md'), 'utf8');
      const first = file.slice(file.indexOf('\n## ') + 1).split('\n## ')[0];
      assert.ok(first.includes(entries[0].content.trim().split('\n')[0]), entries[0].content);
      assert.ok(first.startsWith(`## ${entries[0].date}`), first.split('\n')[0]);
    });

    it('integrations: a provider with its config and secret fields, the generic HTTP API, 404 for others', () => {
      const o = r.openai.data;
      assert.equal(o.name, 'openai');
      assert.equal(o.additionalInfos.kind, 'llm-provider');
      assert.deepEqual(o.config[0], {
        name: 'baseUrl',
        required: false,
        description: 'overrides the provider address (self-hosted or test providers)',
        default: 'https://api.openai.com',
      });
      assert.deepEqual(
        o.secrets.map((f: any) => [f.name, f.required]),
        [['apiKey', true]],
      );
      assert.equal(o.endpoints.models.path, '/v1/models');
      assert.equal(r.httpApi.data.additionalInfos.kind, 'http-api');
      assert.equal(r.unknownIntegration.status, 404);
    });

    it('egress gateways and IPs of every VPC, ordered by name then VPC, paged as {data, meta}', () => {
      assert.equal(r.allGateways.status, 200, JSON.stringify(r.allGateways.error));
      assert.deepEqual(
        r.allGateways.data.data.map((g: any) => [g.metadata.name, g.metadata.vpcName]),
        [
          ['gw', 'net-a'],
          ['gw', 'net-b'],
        ],
      );
      assert.equal(r.allIpsPage1.data.meta.hasMore, true);
      assert.deepEqual(
        r.allIpsPage1.data.data.map((i: any) => i.metadata.name),
        ['ip-net-a'],
      );
      assert.deepEqual(
        r.allIpsPage2.data.data.map((i: any) => i.metadata.name),
        ['ip-net-b'],
      );
      assert.equal(r.allIpsPage2.data.meta.hasMore, false);
    });

    it("a model's revision is its configuration now, named by its generation; 404 for no model", () => {
      const [one] = r.revisions.data.data;
      assert.equal(r.revisions.data.data.length, 1);
      assert.deepEqual(
        { id: one.id, active: one.active, trafficPercent: one.trafficPercent },
        { id: '1', active: true, trafficPercent: 100 },
      );
      assert.equal(r.revisionsAfterUpdate.data.data[0].id, '2');
      assert.equal(r.revisionsOfNone.status, 404);
    });

    it("a connection's model by id (asked of its provider) and where the gateway sends a model's calls", () => {
      assert.deepEqual(r.connectionModel.data, { id: 'fake-2', ownedBy: 'berth-test' });
      assert.equal(r.connectionModelUnknown.status, 404);
      const e = r.endpointConfigurations.data;
      assert.equal(e.integration, 'openai-compatible');
      assert.match(e.endpoints.chat.url, /^http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions$/);
      assert.ok(!JSON.stringify(r).includes('sk-fake-provider-key'), 'the key is never answered');
    });
  });

  describe('workspace users over invitations, leaving, availability', () => {
    let invited: any;
    let members: any;
    let left: any;
    before(async () => {
      const admin = (await ok(await s.api('/service_accounts'))).find(
        (x: any) => x.name === 'admin',
      ).client_id;
      invited = await run({ PHASE: 'users', BL_WORKSPACE: TEAM, INVITEE: user.id });
      // The invitee's home admin (the same operator here) accepts: membership needs the invitee's side's consent.
      await ok(await s.api(`/workspaces/${TEAM}/invitations/${user.id}/accept`, { method: 'POST' }));
      members = await run({ PHASE: 'members', BL_WORKSPACE: TEAM, INVITEE: user.id, ADMIN: admin });
      await ok(await s.api(`/workspaces/${TEAM}/invitations/${user.id}/accept`, { method: 'POST' }));
      left = await run({ PHASE: 'leave', TEAM, HOME_WORKSPACE: 'default' }, user.key);
    });

    it('an invitation is pending (accepted: false) until accepted, and can be offered another role', () => {
      assert.equal(invited.invite.status, 200, JSON.stringify(invited.invite.error));
      assert.equal(invited.invite.data.email, user.id);
      assert.equal(invited.invite.data.workspace, TEAM);
      assert.equal(invited.invite.data.role, 'member');
      assert.equal(invited.inviteNobody.status, 404);
      const pending = invited.pending.data.data.find((u: any) => u.sub === user.id);
      assert.deepEqual(pending, {
        sub: user.id,
        role: 'member',
        accepted: false,
        expired: false,
        source: 'invitation',
      });
      assert.deepEqual(
        invited.before.data.data.map((u: any) => [u.role, u.accepted]),
        [['admin', true]],
      );
      assert.deepEqual([invited.reoffer.data.role, invited.reoffer.data.accepted], ['viewer', false]);
    });

    it('once accepted a member: its role changes, the last admin stays, removal is once, re-invited', () => {
      const accepted = members.accepted.data.data.find((u: any) => u.sub === user.id);
      assert.deepEqual([accepted.role, accepted.accepted], ['viewer', true]);
      assert.deepEqual([members.promote.data.role, members.promote.data.accepted], ['member', true]);
      assert.equal(members.demoteLastAdmin.status, 409);
      assert.match(members.demoteLastAdmin.error.message, /last admin/);
      assert.equal(members.remove.status, 200);
      assert.equal(members.removeAgain.status, 404);
      assert.ok(!members.after.data.data.some((u: any) => u.sub === user.id));
      assert.equal(members.reinvite.status, 200);
    });

    it('a member leaves a workspace (once), never its home; a name is available until taken; a bad name is a 422', () => {
      assert.equal(left.leave.status, 200, JSON.stringify(left.leave.error));
      assert.equal(left.leave.data.name, TEAM);
      assert.equal(left.leaveAgain.status, 404);
      assert.equal(left.leaveHome.status, 409);
      assert.match(left.leaveHome.error.message, /home of service account/);
      assert.equal(left.taken.data, false);
      assert.equal(left.free.data, true);
      assert.deepEqual(left.takenWhy.data, {
        available: false,
        reason: 'taken',
        message: `workspace ${TEAM} already exists`,
      });
      assert.equal(left.invalidName.status, 422);
    });

    it("another tenant reaches none of it: the team's users, its members, its lists, its leave", async () => {
      const asB = (path: string, init: RequestInit & { json?: unknown } = {}, ws?: string) =>
        s.api(path, { ...init, key: beta.key, headers: ws ? { 'x-blaxel-workspace': ws } : {} });
      for (const ws of [TEAM, 'default']) {
        assert.ok([403, 404].includes((await asB('/users', {}, ws)).status), `users of ${ws}`);
        assert.ok([403, 404].includes((await asB('/egressgateways', {}, ws)).status), `gateways of ${ws}`);
      }
      assert.equal((await asB(`/users/${user.id}`, { method: 'PUT', json: { role: 'admin' } })).status, 404);
      assert.equal((await asB(`/users/${user.id}`, { method: 'DELETE' })).status, 404);
      assert.equal((await asB(`/workspaces/${TEAM}/leave`, { method: 'DELETE' })).status, 404);
      assert.deepEqual(await (await asB('/egressgateways')).json(), [], "B's own workspace has none");
      assert.deepEqual(await (await asB('/schedules')).json(), []);
      const own = await (await asB('/users')).json();
      assert.deepEqual(
        own.map((u: any) => u.sub),
        [beta.id],
      );
    });
  });
});
