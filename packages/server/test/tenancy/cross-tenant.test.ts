// The tenant boundary, generated from the API itself: for every operation of GET /v0/openapi.json and every
// data-plane address form (gateway/address-forms.ts, and the routes the server registers under /run/), tenant B
// tries tenant A's objects by name, id, digest, label and path — in its own workspace, naming A's, and with no
// workspace at all — and A's viewer and member try what their role may not do. No answer may hold A's data or a
// secret, none may be a server error, and afterwards A's workspace reads exactly as before. A route the server
// registers that the document lacks, or a path parameter no rule can fill, fails the test: new routes are covered
// without anyone listing them here.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { ADDRESS_FORMS, type AddressForm } from '../../src/gateway/address-forms.js';
import { startTestServer, type TestServer } from '../../src/test-support/server.js';
import { bodiesOf, type Operation, operationsOf, queryOf, urlsOf } from './operations.js';
import { buildWorld, REGION, type World } from './world.js';

const INFERENCE_HOST = 'berth-ct.test';
const NAMES = { a: 'acme-corp', b: 'beta-corp', c: 'gamma-corp' };
/**
 * Routes outside /v0 and /run that belong to neither: health, metrics, the token endpoint, single-use uploads, and
 * the console's static files (no credential, no tenant's data: the page reads everything through /v0).
 */
const OUTSIDE = new Set([
  '/console',
  '/console/*',
  '/healthz',
  '/metrics',
  '/.well-known/jwks.json',
  '/.well-known/oauth-authorization-server',
  '/oauth/token',
  '/uploads/:token',
]);
/**
 * Fields that change by themselves between two reads (decorations, run state, usage counters, the time a feature
 * flag was evaluated, the default window of the schedule metrics, and what a debug read-out measures now: its
 * instances' figures, the cause it names from them, how long it took).
 */
const VOLATILE = new Set([
  'lastUsedAt',
  'expiresIn',
  'expired',
  'state',
  'evaluatedAt',
  'since',
  'until',
  'instances',
  'cause',
  'tookMs',
]);
const DENIED = [401, 403, 404];
const UPGRADE = {
  connection: 'Upgrade',
  upgrade: 'websocket',
  'sec-websocket-version': '13',
  'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
};

interface Answer {
  status: number;
  text: string;
}

interface Exchange {
  what: string;
  who: string;
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
  answer: Answer;
}

/** One request through node:http (fetch cannot set Host). */
function send(
  base: string,
  method: string,
  url: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${url}`, { method, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => {
        text += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    // Let through to a sandbox (101): the status is what the checks read; the tunnel is closed at once.
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 101, text: '' });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const show = (x: Exchange) =>
  `${x.what} as ${x.who}: ${x.method} ${x.url} ${JSON.stringify(x.headers)}${x.body ? ` body ${x.body.slice(0, 300)}` : ''}\n    -> ${x.answer.status} ${x.answer.text.slice(0, 600)}`;

const fastifyToDoc = (url: string) => url.replace(/:\w+|\*/g, '{}');
const docShape = (path: string) => path.replace(/\{\w+\}/g, '{}');

/** The events of a Server-Sent Events answer as `[event, data]`, without their ids. */
function sseData(text: string): unknown[] {
  return text
    .split('\n\n')
    .filter((b) => b.trim())
    .map((block) => {
      const lines = block.split('\n');
      const event = lines.find((l) => l.startsWith('event: '))?.slice(7);
      const data = lines.find((l) => l.startsWith('data: '))?.slice(6);
      return [event, data === undefined ? undefined : JSON.parse(data)];
    });
}

function stable(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(stable);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v)
        .filter(([k]) => !VOLATILE.has(k))
        .map(([k, x]) => [k, stable(x)]),
    );
  return v;
}

describe('cross-tenant: every operation of the API and every data-plane address', () => {
  let s: TestServer;
  let w: World;
  let doc: any;
  let ops: Operation[];
  let beforeAttack: Map<string, unknown>;
  /** The failures of the running test, each with its request and answer. */
  let failures: string[] = [];
  let sent = 0;
  const exercised = new Set<string>();

  const headersOf = (key: string | undefined, extra: Record<string, string> = {}) => ({
    ...(key ? { authorization: `Bearer ${key}` } : {}),
    ...extra,
  });

  async function exchange(
    what: string,
    who: string,
    method: string,
    url: string,
    headers: Record<string, string>,
    body?: { body: string; type: string },
  ): Promise<Exchange> {
    const h = body ? { ...headers, 'content-type': body.type } : headers;
    const text = body?.body;
    sent++;
    const answer = await send(s.url, method, url, h, text);
    return { what, who, method, url, headers: h, body: text, answer };
  }

  /**
   * Strings B wrote into its own objects that name A's (an image of A's in B's sandbox spec): B's own objects echo
   * them back later, which is no leak. Only those whole strings are excused, never the markers inside them.
   */
  const writtenByB = new Set<string>();
  /** B's writes that named one of A's objects in their body and succeeded: the suspects when A's reads change. */
  const namingA: Exchange[] = [];
  function remember(x: Exchange, markers: string[]) {
    if (!x.who.startsWith('B') || !x.body) return;
    const walk = (v: unknown): void => {
      if (typeof v === 'string' && markers.some((m) => v.includes(m))) writtenByB.add(v);
      else if (v && typeof v === 'object') Object.values(v).forEach(walk);
    };
    try {
      walk(JSON.parse(x.body));
    } catch {}
  }

  /** A's markers in the answer that the request did not carry itself (an echoed name is not a leak). */
  function leaked(x: Exchange, markers: string[]) {
    const asked = `${x.url} ${JSON.stringify(x.headers)} ${x.body ?? ''}`;
    const decoded = decodeURIComponent(asked);
    let text = x.answer.text;
    // Quoted or inside a message of B's own object (an event saying B's image could not be had).
    if (x.who.startsWith('B')) for (const w of writtenByB) text = text.split(w).join('');
    remember(x, markers);
    return markers.filter((m) => text.includes(m) && !asked.includes(m) && !decoded.includes(m));
  }

  function fail(x: Exchange, why: string) {
    failures.push(`${why}\n  ${show(x)}`);
  }

  /** What every answer must respect: no server error, no secret, and (for another tenant) none of A's data. */
  function checkCommon(x: Exchange, markers: string[]) {
    // 501 is a route Berth does not implement; 502-504 an upstream (a registry, a provider) that did not answer.
    if (x.answer.status === 500 || x.answer.status > 504) fail(x, 'server error');
    const l = leaked(x, markers);
    if (l.length) fail(x, `the answer holds A's ${l.join(', ')}`);
  }

  /** A's admin reads everything the document lets it read, secrets shown. */
  async function snapshot(): Promise<Map<string, unknown>> {
    const out = new Map<string, unknown>();
    for (const op of ops) {
      if (op.method !== 'GET' || op.public) continue;
      for (const url of urlsOf(op, w) ?? []) {
        const q = queryOf(op, w, { secrets: true, labels: false });
        const x = await exchange(op.operationId, "A's admin", 'GET', `/v0${url}${q}`, headersOf(w.a.key));
        let body: unknown = x.answer.text;
        try {
          body = JSON.parse(x.answer.text);
        } catch {
          // A stream of events (GET /watch): its events' data, compared as JSON is; `id:` is the store's sequence
          // number of each write, which a status write to an object bumps.
          if (/^(id|event): /m.test(x.answer.text)) body = sseData(x.answer.text);
        }
        out.set(`${op.operationId} ${url}`, { status: x.answer.status, body: stable(body) });
      }
    }
    return out;
  }

  before(async () => {
    s = await startTestServer({
      BERTH_INFERENCE_HOST: INFERENCE_HOST,
      BERTH_LOG_LEVEL: 'warn',
      BERTH_STANDBY_AFTER: '3600',
    });
    w = await buildWorld(s, NAMES);
    doc = await (await s.api('/openapi.json', { key: null })).json();
    ops = operationsOf(doc);
  });
  after(() => s?.close());

  it('covers every route: each /v0 route the server registers is documented, and every path parameter can be filled', () => {
    failures = [];
    const documented = new Set(ops.map((o) => `${o.method} ${docShape(o.path)}`));
    const missing: string[] = [];
    const unplaced: string[] = [];
    for (const r of s.routes) {
      if (r.method === 'HEAD' || r.method === 'OPTIONS') continue;
      if (r.url.startsWith('/v0/')) {
        const key = `${r.method} ${fastifyToDoc(r.url.slice(3))}`;
        if (!documented.has(key)) missing.push(`${r.method} ${r.url}`);
      } else if (!r.url.startsWith('/run/') && !OUTSIDE.has(r.url)) unplaced.push(`${r.method} ${r.url}`);
    }
    assert.deepEqual(missing, [], 'routes the server serves under /v0 that GET /v0/openapi.json lacks');
    assert.deepEqual(
      unplaced,
      [],
      'routes outside /v0 and /run/ that this test does not know (add to OUTSIDE with why)',
    );
    const unfilled = ops
      .filter((o) => urlsOf(o, w) === undefined)
      .map((o) => `${o.method} ${o.path} (${o.params.join(', ')})`);
    assert.deepEqual(
      unfilled,
      [],
      "operations with a path parameter no rule fills with A's value (operations.ts valuesFor, world.ts values)",
    );
    const roleless = ops.filter((o) => !o.role && !o.public).map((o) => o.operationId);
    assert.ok(roleless.length < ops.length / 4, `most operations act in a workspace: ${roleless.join(', ')}`);
  });

  it("A's own addresses answer A (the addresses the data-plane checks aim at are real)", async () => {
    failures = [];
    for (const [form, spec] of Object.entries(ADDRESS_FORMS) as [
      AddressForm,
      (typeof ADDRESS_FORMS)[AddressForm],
    ][]) {
      const o = w.objects[spec.kind];
      const r = spec.request(
        {
          key: { kind: spec.kind, workspace: NAMES.a, parent: o.parent, name: o.name },
          region: REGION,
          triggerPath: w.triggerPath,
          prefixUrl: w.previewPrefix,
        },
        INFERENCE_HOST,
      );
      const headers = headersOf(w.a.key, r.host ? { host: `${r.host}:${s.port}` } : {});
      const x = await exchange(
        form,
        "A's admin",
        r.method,
        r.path,
        headers,
        r.method === 'POST' ? { body: '{}', type: 'application/json' } : undefined,
      );
      exercised.add(form);
      if (x.answer.status === 404 || x.answer.status === 401 || x.answer.status === 403)
        fail(x, `A's own ${form} address does not reach A's ${spec.kind}`);
    }
    // Executions the job trigger started end before A's workspace is read.
    const job = w.objects.Job.name;
    for (let i = 0; i < 600; i++) {
      const list = await (await s.api(`/jobs/${job}/executions`, { key: w.a.key })).json();
      if (list.every((e: any) => ['succeeded', 'failed', 'cancelled'].includes(e.status))) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    beforeAttack = await snapshot();
    assert.equal(failures.length, 0, failures.join('\n'));
  });

  it("tenant B reaches none of A's objects through any /v0 operation", async () => {
    failures = [];
    const B = [
      {
        who: 'B in its own workspace',
        headers: headersOf(w.b.key, { 'x-blaxel-workspace': NAMES.b }),
        inA: false,
      },
      { who: 'B with no workspace header', headers: headersOf(w.b.key), inA: false },
      {
        who: "B naming A's workspace (X-Service-Workspace)",
        headers: headersOf(w.b.key, { 'x-service-workspace': NAMES.a }),
        inA: true,
      },
      {
        who: "B naming A's workspace (X-Blaxel-Workspace)",
        headers: headersOf(w.b.key, { 'x-blaxel-workspace': NAMES.a }),
        inA: true,
      },
      {
        who: "B's OAuth token naming A's workspace",
        headers: headersOf(w.bJwt, { 'x-service-workspace': NAMES.a }),
        inA: true,
      },
      // Both aliases, disagreeing: whichever one a route reads, it must be the one its access was checked for.
      {
        who: "B naming its own workspace (X-Service-Workspace) and A's (X-Blaxel-Workspace)",
        headers: headersOf(w.b.key, { 'x-service-workspace': NAMES.b, 'x-blaxel-workspace': NAMES.a }),
        inA: false,
      },
      {
        who: "B naming A's workspace (X-Service-Workspace) and its own (X-Blaxel-Workspace)",
        headers: headersOf(w.b.key, { 'x-service-workspace': NAMES.a, 'x-blaxel-workspace': NAMES.b }),
        inA: true,
      },
    ];
    for (const op of ops) {
      for (const url of urlsOf(op, w) ?? []) {
        for (const [p, body] of B.flatMap((p) => bodiesOf(op, doc, w).map((b) => [p, b] as const))) {
          const x = await exchange(
            op.operationId,
            p.who,
            op.method,
            `/v0${url}${queryOf(op, w, { secrets: true })}`,
            p.headers,
            body,
          );
          checkCommon(x, w.markers);
          if (p.inA && op.role && !DENIED.includes(x.answer.status))
            fail(x, `B acted in A's workspace: expected ${DENIED.join('/')}`);
          if (op.method !== 'GET' && x.answer.status < 300 && w.markers.some((m) => body?.body.includes(m)))
            namingA.push(x);
        }
      }
      exercised.add(`${op.method} ${op.path}`);
    }
    assert.equal(failures.length, 0, `${failures.length} failures:\n${failures.join('\n')}`);
  });

  it("A's viewer and member are refused what their role may not do, and no answer shows them a secret", async () => {
    failures = [];
    const rank = { viewer: 0, member: 1, admin: 2 } as const;
    for (const [who, key, role] of [
      ["A's viewer", w.aViewerKey, 'viewer'],
      ["A's member", w.aMemberKey, 'member'],
    ] as const) {
      for (const op of ops) {
        for (const url of urlsOf(op, w) ?? []) {
          const needs = op.role && rank[op.role] > rank[role];
          // The viewer tries every write; the member what needs an admin; both every read (no secret may show).
          if (op.method !== 'GET' && !needs && op.role) continue;
          if (op.method !== 'GET' && !op.role) continue;
          const x = await exchange(
            op.operationId,
            who,
            op.method,
            `/v0${url}${queryOf(op, w, { secrets: false })}`,
            headersOf(key),
            bodiesOf(op, doc, w)[0],
          );
          checkCommon(x, w.secrets);
          if (needs && x.answer.status !== 403) fail(x, `${role} may not (needs ${op.role}): expected 403`);
          if (op.method === 'GET' && op.query.includes('show_secrets')) {
            const y = await exchange(
              op.operationId,
              who,
              'GET',
              `/v0${url}${queryOf(op, w, { secrets: true })}`,
              headersOf(key),
            );
            checkCommon(y, w.secrets);
            if (y.answer.status !== 403) fail(y, `${role} asked for secrets: expected 403`);
          }
        }
      }
    }
    assert.equal(failures.length, 0, `${failures.length} failures:\n${failures.join('\n')}`);
  });

  it("tenant B reaches none of A's data-plane addresses, by key, by its own preview token, or with none", async () => {
    failures = [];
    // A's own viewer may learn A's names; nobody else may.
    const denied = async (x: Exchange) => {
      checkCommon(x, x.who.startsWith("A's viewer") ? w.secrets : w.markers);
      if (!DENIED.includes(x.answer.status)) fail(x, `expected ${DENIED.join('/')}`);
    };
    const outsiders: { who: string; headers: Record<string, string> }[] = [
      { who: "B's key", headers: headersOf(w.b.key, { 'x-blaxel-authorization': `Bearer ${w.b.key}` }) },
      { who: "B's key naming A's workspace", headers: headersOf(w.b.key, { 'x-blaxel-workspace': NAMES.a }) },
      { who: "B's OAuth token", headers: { 'x-blaxel-authorization': `Bearer ${w.bJwt}` } },
      { who: "B's own preview token", headers: { 'x-blaxel-preview-token': w.bPreview.token } },
      { who: 'no credential', headers: {} },
    ];
    // Workloads run code that reads the workspace's secrets: a viewer may not reach them (gateway/auth.ts).
    const callers = [...outsiders, { who: "A's viewer", headers: headersOf(w.aViewerKey) }];
    for (const [form, spec] of Object.entries(ADDRESS_FORMS) as [
      AddressForm,
      (typeof ADDRESS_FORMS)[AddressForm],
    ][]) {
      const o = w.objects[spec.kind];
      const r = spec.request(
        {
          key: { kind: spec.kind, workspace: NAMES.a, parent: o.parent, name: o.name },
          region: REGION,
          triggerPath: w.triggerPath,
          prefixUrl: w.previewPrefix,
        },
        INFERENCE_HOST,
      );
      for (const c of callers) {
        const headers = { ...c.headers, ...(r.host ? { host: `${r.host}:${s.port}` } : {}) };
        const body = r.method === 'POST' ? { body: '{}', type: 'application/json' } : undefined;
        await denied(await exchange(form, c.who, r.method, r.path, headers, body));
        // The same address asked to upgrade (a terminal, a WebSocket): another way in, answered elsewhere.
        const up = await exchange(form, `${c.who} (upgrade)`, 'GET', r.path, { ...headers, ...UPGRADE });
        await denied(up);
        if (c.who.includes('preview token')) {
          const q = `${r.path}${r.path.includes('?') ? '&' : '?'}bl_preview_token=${w.bPreview.token}`;
          await denied(
            await exchange(
              form,
              `${c.who} (query)`,
              r.method,
              q,
              { ...(r.host ? { host: `${r.host}:${s.port}` } : {}) },
              body,
            ),
          );
        }
      }
      exercised.add(form);
    }
    // Data-plane routes the HTTP server registers itself (the model gateway): parameters from their names.
    const fill: Record<string, string> = { workspace: NAMES.a, model: w.objects.Model.name };
    for (const r of s.routes) {
      if (!r.url.startsWith('/run/') || r.method === 'HEAD' || r.method === 'OPTIONS') continue;
      const unknown = [...r.url.matchAll(/:(\w+)/g)].map((m) => m[1]).filter((p) => !fill[p]);
      if (unknown.length) {
        failures.push(`data-plane route ${r.url}: no rule fills ${unknown.join(', ')}`);
        continue;
      }
      const path = r.url.replace(/:(\w+)/g, (_, p) => fill[p]).replace('*', 'v1/chat/completions');
      const method = r.method === 'GET' ? 'GET' : 'POST';
      // A model endpoint takes every role of the workspace (a call reads nothing of it): outsiders only.
      for (const c of outsiders) {
        const body =
          method === 'POST' ? { body: '{"model":"x","messages":[]}', type: 'application/json' } : undefined;
        await denied(await exchange(`route ${r.url}`, c.who, method, path, c.headers, body));
      }
      exercised.add(`${r.method} ${r.url}`);
    }
    assert.equal(failures.length, 0, `${failures.length} failures:\n${failures.join('\n')}`);
  });

  it("A's workspace reads exactly as before: nothing of A's was changed, added or removed", async () => {
    failures = [];
    // What was exercised, for the report (and so a run that exercised nothing cannot pass).
    console.log(
      `cross-tenant: ${ops.length} operations, ${exercised.size} operations and address forms exercised, ${sent} requests`,
    );
    assert.ok(exercised.size >= ops.length);
    const afterAttack = await snapshot();
    const changed: string[] = [];
    for (const [k, v] of beforeAttack) {
      const now = afterAttack.get(k);
      try {
        assert.deepEqual(now, v);
      } catch {
        changed.push(
          `${k}\n    before ${JSON.stringify(v).slice(0, 800)}\n    after  ${JSON.stringify(now).slice(0, 800)}`,
        );
      }
    }
    assert.deepEqual(
      changed,
      [],
      `A's reads changed:\n${changed.join('\n')}\nB's writes that named A's objects and succeeded:\n${namingA.map(show).join('\n')}`,
    );
  });
});
