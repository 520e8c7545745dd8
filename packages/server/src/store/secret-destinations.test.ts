// A secret sent back masked keeps the stored value, but below the admin role only where it was sent: for every kind
// that holds a secret with a destination (a connection's key and its integration/config, a sandbox's proxy routing
// secrets and their destinations, a trigger's callback signing secret and its callbackUrl), changing the
// destination needs the secret again, or an admin. Env secrets have no destination but the workload itself.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { SecretBox } from '../crypto/secret-box.js';
import { ApiError } from '../errors.js';
import { KINDS } from '../kinds/index.js';
import { REDACTED } from '../kinds/secret-paths.js';
import type { Role } from '../kinds/types.js';
import { Resources } from './resources.js';
import { SqliteStore } from './sqlite.js';

const resources = () =>
  new Resources(new SqliteStore(':memory:'), KINDS, new SecretBox(randomBytes(32)), {
    regions: ['local'],
  });
const ctx = (role: Role) => ({ workspace: 'ws', parents: [], actor: role, role });

/** The stored object as a client reads it (secrets masked), for the GET-then-PUT of the service's SDK. */
async function read(r: Resources, kind: string, name: string) {
  const kd = r.kind(kind);
  const view = r.view(kd, (await r.get(kd, 'ws', [], name))!);
  delete view.metadata.resourceVersion;
  return view;
}

const cases: {
  kind: string;
  spec: any;
  /** Points the secret's destination at `to` (a host name). */
  move: (spec: any, to: string) => void;
  keep: (spec: any) => void;
  secret: (spec: any) => string;
  set: (spec: any, v: string) => void;
  pointer: string;
}[] = [
  {
    kind: 'IntegrationConnection',
    spec: {
      integration: 'openai-compatible',
      config: { baseUrl: 'https://llm.example/v1' },
      secret: { apiKey: 'sk-1' },
    },
    move: (s, to) => {
      s.config.baseUrl = `https://${to}/v1`;
    },
    keep: (s) => {
      s.sandbox = true;
    },
    secret: (s) => s.secret.apiKey,
    set: (s, v) => {
      s.secret.apiKey = v;
    },
    pointer: '/spec/config',
  },
  {
    kind: 'IntegrationConnection',
    spec: { integration: 'openai', config: { organization: 'o' }, secret: { apiKey: 'sk-1' } },
    move: (s, to) => {
      s.integration = to === 'member.example' ? 'openai-compatible' : 'groq';
    },
    keep: (s) => {
      s.sandbox = false;
    },
    secret: (s) => s.secret.apiKey,
    set: (s, v) => {
      s.secret.apiKey = v;
    },
    pointer: '/spec/integration',
  },
  {
    kind: 'Sandbox',
    spec: {
      network: {
        proxy: {
          routing: [
            { destinations: ['api.example'], headers: { 'X-Key': '{{SECRET:k}}' }, secrets: { k: 'tok' } },
          ],
        },
      },
    },
    move: (s, to) => {
      s.network.proxy.routing[0].destinations = [to];
    },
    keep: (s) => {
      s.network.proxy.routing[0].headers = { Authorization: 'Bearer {{SECRET:k}}' };
    },
    // Reads omit routing secrets (the service's wire); a rule sent back without them keeps the stored ones.
    secret: (s) => s.network.proxy.routing[0].secrets?.k,
    set: (s, v) => {
      s.network.proxy.routing[0].secrets = { ...s.network.proxy.routing[0].secrets, k: v };
    },
    pointer: '/spec/network/proxy/routing/0/destinations',
  },
  {
    kind: 'Job',
    spec: {
      triggers: [{ id: 't1', type: 'http', configuration: { callbackUrl: 'https://hooks.example/a' } }],
    },
    move: (s, to) => {
      s.triggers[0].configuration.callbackUrl = `https://${to}/hook`;
    },
    keep: (s) => {
      s.triggers[0].configuration.retry = 2;
    },
    secret: (s) => s.triggers[0].configuration.callbackSecret,
    set: (s, v) => {
      s.triggers[0].configuration.callbackSecret = v;
    },
    pointer: '/spec/triggers/0/configuration/callbackUrl',
  },
  {
    kind: 'Agent',
    spec: {
      triggers: [{ id: 't1', type: 'http-async', configuration: { callbackUrl: 'https://hooks.example/a' } }],
    },
    move: (s, to) => {
      s.triggers[0].configuration.callbackUrl = `https://${to}/hook`;
    },
    keep: (s) => {
      s.triggers[0].configuration.timeout = 60;
    },
    secret: (s) => s.triggers[0].configuration.callbackSecret,
    set: (s, v) => {
      s.triggers[0].configuration.callbackSecret = v;
    },
    pointer: '/spec/triggers/0/configuration/callbackUrl',
  },
];

for (const c of cases)
  test(`${c.kind}: a member cannot send a masked secret to ${c.pointer} changed; an admin can, and anyone with the secret`, async () => {
    const r = resources();
    const kd = r.kind(c.kind);
    await r.create(kd, ctx('admin'), { metadata: { name: 'x' }, spec: structuredClone(c.spec) });
    const stored = c.secret(r.openSecrets(kd, (await r.get(kd, 'ws', [], 'x'))!.body.spec));

    const moved = await read(r, c.kind, 'x');
    assert.ok([REDACTED, undefined].includes(c.secret(moved.spec)), 'masked or omitted on a read');
    c.move(moved.spec, 'member.example');
    await assert.rejects(r.replace(kd, ctx('member'), 'x', structuredClone(moved)), (e: unknown) => {
      assert.ok(e instanceof ApiError);
      assert.equal(e.status, 403);
      assert.deepEqual(
        e.opts.errors?.map((i) => i.pointer),
        [c.pointer],
      );
      return true;
    });
    assert.equal(
      c.secret(r.openSecrets(kd, (await r.get(kd, 'ws', [], 'x'))!.body.spec)),
      stored,
      'unchanged',
    );

    const kept = await read(r, c.kind, 'x');
    c.keep(kept.spec);
    await r.replace(kd, ctx('member'), 'x', kept);

    // The member's own secret in place of the masked one: its own to send anywhere.
    const own = await read(r, c.kind, 'x');
    c.move(own.spec, 'member.example');
    c.set(own.spec, 'member-own');
    await r.replace(kd, ctx('member'), 'x', own);
    assert.equal(c.secret(r.openSecrets(kd, (await r.get(kd, 'ws', [], 'x'))!.body.spec)), 'member-own');

    // An admin moves a stored secret with it masked.
    const admin = await read(r, c.kind, 'x');
    c.move(admin.spec, 'admin.example');
    await r.replace(kd, ctx('admin'), 'x', admin);
    assert.equal(c.secret(r.openSecrets(kd, (await r.get(kd, 'ws', [], 'x'))!.body.spec)), 'member-own');
  });
