import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KINDS, kindByName } from './index.js';
import { SAMPLES } from './samples.js';
import { expiresAtMs } from './sandbox.js';
import { checkBody } from './schema.js';
import { REDACTED, visitSecrets } from './secret-paths.js';
import type { KindDescriptor, ValidationContext } from './types.js';

const ctx = (existing: string[] = []): ValidationContext => ({
  workspace: 'default',
  regions: ['local', 'edge'],
  exists: async (kind, name) => existing.includes(`${kind}/${name}`),
});

const kind = (name: string) => KINDS.find((k) => k.kind === name)!;

/** The create pipeline's pure steps: schema check, defaults, kind rules. */
async function prepare(kd: KindDescriptor, raw: unknown, prev?: any, existing: string[] = []) {
  const r = checkBody(kd, raw);
  if (!r.ok) return { issues: r.issues, body: undefined, unknown: [] as string[] };
  kd.defaults?.(r.value.body.spec, { regions: ['local', 'edge'] });
  const issues = (await kd.validate?.(r.value.body, prev, ctx(existing))) ?? [];
  return { issues, body: r.value.body, unknown: r.value.unknown };
}

describe('every kind', () => {
  it('has a sample, a unique path and a unique kind name', () => {
    assert.deepEqual(KINDS.map((k) => k.kind).sort(), Object.keys(SAMPLES).sort());
    assert.equal(new Set(KINDS.map((k) => k.path)).size, KINDS.length);
  });

  it('lists parents before their children', () => {
    KINDS.forEach((k, i) => {
      for (const p of k.parents ?? [])
        assert.ok(KINDS.findIndex((x) => x.kind === p.kind) < i, `${p.kind} before ${k.kind}`);
    });
  });

  for (const kd of KINDS) {
    const sample = SAMPLES[kd.kind];
    it(`${kd.kind}: accepts its minimal body`, async () => {
      const { issues } = await prepare(kd, sample.valid);
      assert.deepEqual(issues, []);
    });
    it(`${kd.kind}: rejects an invalid body naming ${sample.invalid.pointer}`, () => {
      const r = checkBody(kd, sample.invalid.body);
      assert.equal(r.ok, false);
      if (!r.ok)
        assert.ok(
          r.issues.some((i) => i.pointer === sample.invalid.pointer),
          JSON.stringify(r.issues),
        );
    });
    it(`${kd.kind}: names an unknown spec field and drops it`, () => {
      const r = checkBody(kd, { ...sample.valid, spec: { ...sample.valid.spec, bogusField: 1 } });
      assert.ok(r.ok);
      if (r.ok) {
        assert.deepEqual(r.value.unknown, ['/spec/bogusField']);
        assert.equal(r.value.body.spec.bogusField, undefined);
      }
    });
    it(`${kd.kind}: is found by its plural and aliases`, () => {
      assert.equal(kindByName(kd.plural), kd);
      for (const a of kd.aliases ?? []) assert.equal(kindByName(a), kd);
    });
  }
});

describe('defaults', () => {
  it('agent: enabled, memory 2048 MB, scale 0..10, generation, region, trigger id and callback secret', async () => {
    const { body } = await prepare(kind('Agent'), {
      metadata: { name: 'a' },
      spec: { triggers: [{ type: 'http-async', configuration: { callbackUrl: 'http://127.0.0.1:9/cb' } }] },
    });
    assert.equal(body.spec.enabled, true);
    assert.equal(body.spec.region, 'local');
    assert.deepEqual(
      { ...body.spec.runtime },
      { memory: 2048, minScale: 0, maxScale: 10, generation: 'mk3' },
    );
    assert.match(body.spec.triggers[0].id, /^trigger-[0-9a-f]{8}$/);
    assert.match(body.spec.triggers[0].configuration.callbackSecret, /^whsec_/);
  });

  it('job: memory 1024 MB, one task at a time, no retries, 900 s timeout', async () => {
    const { body } = await prepare(kind('Job'), { metadata: { name: 'j' }, spec: {} });
    assert.deepEqual(
      { ...body.spec.runtime },
      { memory: 1024, maxConcurrentTasks: 1, maxRetries: 0, timeout: 900 },
    );
  });

  it('sandbox: memory 4096 MB, expiration action delete', async () => {
    const { body } = await prepare(kind('Sandbox'), {
      metadata: { name: 's' },
      spec: { lifecycle: { expirationPolicies: [{ type: 'ttl-idle', value: '30m' }] } },
    });
    assert.equal(body.spec.runtime.memory, 4096);
    assert.equal(body.spec.lifecycle.expirationPolicies[0].action, 'delete');
  });

  it('volume: 1024 MB in the first region; egress IP: IPv4; function: type mcp', async () => {
    assert.deepEqual((await prepare(kind('Volume'), { metadata: { name: 'v' }, spec: {} })).body.spec, {
      size: 1024,
      region: 'local',
    });
    assert.equal(
      (await prepare(kind('EgressIp'), { metadata: { name: 'i' }, spec: {} })).body.spec.ipFamily,
      'IPv4',
    );
    assert.equal(
      (await prepare(kind('Function'), { metadata: { name: 'f' }, spec: {} })).body.spec.type,
      'mcp',
    );
  });
});

describe('rules', () => {
  it('function: schedule and http-async triggers are 422s on their type; an http one is fine', async () => {
    const { issues } = await prepare(kind('Function'), {
      metadata: { name: 'f' },
      spec: {
        triggers: [
          { type: 'http', configuration: { path: 'f/mcp' } },
          { type: 'schedule', configuration: { schedule: '0 0 * * *' } },
          { type: 'cron', configuration: { schedule: '0 0 * * *' } },
          { type: 'http-async' },
        ],
      },
    });
    assert.deepEqual(
      issues.map((i) => i.pointer),
      ['/spec/triggers/1/type', '/spec/triggers/2/type', '/spec/triggers/3/type'],
    );
  });

  it('agent: minScale above maxScale is a 422 on /spec/runtime/minScale', async () => {
    const { issues } = await prepare(kind('Agent'), {
      metadata: { name: 'a' },
      spec: { runtime: { minScale: 5, maxScale: 2 } },
    });
    assert.deepEqual(
      issues.map((i) => i.pointer),
      ['/spec/runtime/minScale'],
    );
  });

  it('agent and function: a writable volume needs one replica and no canary; read-only ones are shared', async () => {
    const vols = [
      { name: 'ro', mountPath: '/ro', readOnly: true },
      { name: 'rw', mountPath: '/rw' },
    ];
    const existing = ['Volume/ro', 'Volume/rw'];
    for (const k of ['Agent', 'Function']) {
      const scaled = await prepare(
        kind(k),
        { metadata: { name: 'a' }, spec: { runtime: { maxScale: 2 }, volumes: vols } },
        undefined,
        existing,
      );
      assert.deepEqual(
        scaled.issues.map((i) => i.pointer),
        ['/spec/volumes/1/readOnly'],
      );
      assert.match(scaled.issues[0].message, /runtime\.maxScale 1/);
      const canary = await prepare(
        kind(k),
        {
          metadata: { name: 'a' },
          spec: { runtime: { maxScale: 1 }, revision: { canary: 'r2', canaryPercent: 10 }, volumes: vols },
        },
        undefined,
        existing,
      );
      assert.deepEqual(
        canary.issues.map((i) => i.pointer),
        ['/spec/volumes/1/readOnly'],
      );
      assert.match(canary.issues[0].message, /canary/);
      // Unasked, a workload with a writable volume runs one replica; read-only volumes keep the default scale.
      const one = await prepare(
        kind(k),
        { metadata: { name: 'a' }, spec: { volumes: vols } },
        undefined,
        existing,
      );
      assert.deepEqual(one.issues, []);
      assert.equal(one.body.spec.runtime.maxScale, 1);
      const shared = await prepare(
        kind(k),
        { metadata: { name: 'a' }, spec: { runtime: { maxScale: 5 }, volumes: [vols[0]] } },
        undefined,
        existing,
      );
      assert.deepEqual(shared.issues, []);
    }
  });

  it('an unknown region names the known ones', async () => {
    const { issues } = await prepare(kind('Sandbox'), {
      metadata: { name: 's' },
      spec: { region: 'mars-1' },
    });
    assert.equal(issues[0].pointer, '/spec/region');
    assert.match(issues[0].message, /known regions: local, edge/);
  });

  it('references to missing objects are named; existing ones and unchanged ones pass', async () => {
    const body = {
      metadata: { name: 'm' },
      spec: { runtime: { type: 'openai' }, integrationConnections: ['a', 'b'] },
    };
    const { issues } = await prepare(kind('Model'), body, undefined, ['IntegrationConnection/a']);
    assert.deepEqual(
      issues.map((i) => i.pointer),
      ['/spec/integrationConnections/1'],
    );
    const again = await prepare(kind('Model'), body, { spec: { integrationConnections: ['b'] } }, [
      'IntegrationConnection/a',
    ]);
    assert.deepEqual(again.issues, []);
  });

  it('sandbox expiration policies: date takes an ISO date, the others a duration', async () => {
    const { issues } = await prepare(kind('Sandbox'), {
      metadata: { name: 's' },
      spec: {
        lifecycle: {
          expirationPolicies: [
            { type: 'date', value: '2030-01-01T00:00:00Z' },
            { type: 'date', value: '1h' },
            { type: 'ttl-max-age', value: 'tomorrow' },
          ],
          terminatedRetention: '1h',
        },
      },
    });
    assert.deepEqual(
      issues.map((i) => i.pointer),
      ['/spec/lifecycle/expirationPolicies/1/value', '/spec/lifecycle/expirationPolicies/2/value'],
    );
    const bad = checkBody(kind('Sandbox'), {
      metadata: { name: 's' },
      spec: { lifecycle: { expirationPolicies: [{ type: 'ttl-soon', value: '1h', action: 'archive' }] } },
    });
    assert.ok(!bad.ok && bad.issues.length === 2, JSON.stringify(bad));
  });

  it('sandbox network: bad domain patterns and unknown {{SECRET:...}} names are 422s', async () => {
    const { issues } = await prepare(kind('Sandbox'), {
      metadata: { name: 's' },
      spec: {
        network: {
          allowedDomains: '*.example.com, api.openai.com',
          forbiddenDomains: ['bad domain!'],
          proxy: {
            routing: [
              {
                destinations: ['api.x.com'],
                headers: { Authorization: 'Bearer {{SECRET:tok}}' },
                secrets: {},
              },
            ],
          },
        },
      },
    });
    assert.deepEqual(
      issues.map((i) => i.pointer),
      ['/spec/network/forbiddenDomains', '/spec/network/proxy/routing/0/headers'],
    );
  });

  it('schedule triggers need a cron expression', async () => {
    const { issues } = await prepare(kind('Job'), {
      metadata: { name: 'j' },
      spec: {
        triggers: [
          { type: 'schedule', configuration: { schedule: '*/5 * * * *' } },
          { type: 'cron', configuration: { schedule: 'every day' } },
        ],
      },
    });
    assert.deepEqual(
      issues.map((i) => i.pointer),
      ['/spec/triggers/1/configuration/schedule'],
    );
  });

  it('preview: hop-by-hop headers cannot be injected', async () => {
    const { issues } = await prepare(kind('Preview'), {
      metadata: { name: 'p' },
      spec: { port: 80, responseHeaders: { 'X-Frame-Options': 'DENY', Connection: 'close' } },
    });
    assert.deepEqual(
      issues.map((i) => i.pointer),
      ['/spec/responseHeaders/Connection'],
    );
  });
});

describe('request shapes', () => {
  it('null means "not set", as the SDK sends it to clear a ttl', () => {
    const r = checkBody(kind('Sandbox'), {
      metadata: { name: 's' },
      spec: { lifecycle: null, runtime: { ttl: null } },
    });
    assert.ok(r.ok);
    if (r.ok) assert.deepEqual(r.value.body.spec, { runtime: {} });
  });

  it('server-written spec fields and response-only fields are dropped without a warning', () => {
    const r = checkBody(kind('Preview'), {
      metadata: { name: 'p', resourceName: 'box', resourceType: 'Sandbox', workspace: 'x' },
      spec: { port: 80, url: 'http://x', region: 'local' },
      status: 'DEPLOYED',
    });
    assert.ok(r.ok);
    if (r.ok) {
      assert.deepEqual(r.value.unknown, []);
      assert.deepEqual(r.value.body, { metadata: { name: 'p' }, spec: { port: 80 } });
    }
  });

  it('map-valued proxy headers are kept whole (a union of string and map)', () => {
    const r = checkBody(kind('Sandbox'), {
      metadata: { name: 's' },
      spec: {
        network: {
          proxy: {
            routing: [{ headers: { 'X-Key': '{{SECRET:k}}' }, body: 'k={{SECRET:k}}', secrets: { k: 'v' } }],
          },
        },
      },
    });
    assert.ok(r.ok);
    if (r.ok) {
      assert.deepEqual(r.value.unknown, []);
      assert.deepEqual(r.value.body.spec.network.proxy.routing[0].headers, { 'X-Key': '{{SECRET:k}}' });
    }
  });
});

describe('secrets', () => {
  const seal = (v: string) => `sealed(${v})`;

  it('every value of a connection secret map, routing secrets, secret envs and callback secrets are secret', () => {
    const spec = {
      secret: { A: '1', B: '2' },
      runtime: {
        envs: [
          { name: 'X', value: 'x', secret: true },
          { name: 'Y', value: 'y' },
        ],
      },
      network: { proxy: { routing: [{ secrets: { t: 'tok' } }] } },
    };
    const ic = structuredClone(spec);
    visitSecrets(ic, kind('IntegrationConnection').secrets, seal);
    assert.deepEqual(ic.secret, { A: 'sealed(1)', B: 'sealed(2)' });
    const sb = structuredClone(spec);
    visitSecrets(sb, kind('Sandbox').secrets, seal);
    assert.deepEqual(sb.runtime.envs, [
      { name: 'X', value: 'sealed(x)', secret: true },
      { name: 'Y', value: 'y' },
    ]);
    assert.deepEqual(sb.network.proxy.routing[0].secrets, { t: 'sealed(tok)' });
  });

  it('a redacted callback secret sent back is matched to the stored one by trigger id', () => {
    const prev = {
      triggers: [
        { id: 't2', configuration: { callbackSecret: 'old2' } },
        { id: 't1', configuration: { callbackSecret: 'old1' } },
      ],
    };
    const next = { triggers: [{ id: 't1', configuration: { callbackSecret: REDACTED } }] };
    visitSecrets(next, kind('Agent').secrets, (v, p) => (v === REDACTED ? p : v), prev);
    assert.equal(next.triggers[0].configuration.callbackSecret, 'old1');
  });
});

describe('sandbox expiry', () => {
  const created = '2030-01-01T00:00:00.000Z';
  const t0 = Date.parse(created);

  it('is the earliest of ttl, expires and the lifecycle policies (ttl-idle from the last use)', () => {
    const obj = {
      metadata: { createdAt: created },
      lastUsedAt: '2030-01-01T00:30:00.000Z',
      spec: {
        runtime: { ttl: '2h', expires: '2030-01-01T03:00:00Z' },
        lifecycle: { expirationPolicies: [{ type: 'ttl-idle', value: '1h' }] },
      },
    };
    assert.equal(expiresAtMs(obj), t0 + 90 * 60_000);
  });

  it('ttl and ttl-max-age count from when the sandbox first ran; one still starting cannot expire', () => {
    const spec = {
      runtime: { ttl: '10m' },
      lifecycle: { expirationPolicies: [{ type: 'ttl-max-age', value: '1h' }] },
    };
    const readyAt = new Date(t0 + 120_000).toISOString();
    assert.equal(expiresAtMs({ metadata: { createdAt: created }, readyAt, spec }), t0 + 120_000 + 600_000);
    const starting = { metadata: { createdAt: created }, status: 'DEPLOYING', spec };
    assert.equal(expiresAtMs(starting, t0 + 3_600_000), t0 + 3_600_000 + 600_000);
    const failed = { metadata: { createdAt: created }, status: 'FAILED', spec };
    assert.equal(
      expiresAtMs(failed, t0 + 3_600_000),
      t0 + 600_000,
      'one that never ran counts from creation',
    );
  });

  it('decorate writes expiresIn in whole seconds rounded up, never negative, and only when something expires', () => {
    const sb = kind('Sandbox');
    const obj: any = { metadata: { createdAt: created }, spec: { runtime: { ttl: '10m' } } };
    sb.decorate!(obj, t0 + 60_500);
    assert.equal(obj.expiresIn, 540);
    sb.decorate!(obj, t0 + 3_600_000);
    assert.equal(obj.expiresIn, 0);
    const plain: any = { metadata: { createdAt: created }, spec: { runtime: {} } };
    sb.decorate!(plain, t0);
    assert.equal('expiresIn' in plain, false);
  });
});
