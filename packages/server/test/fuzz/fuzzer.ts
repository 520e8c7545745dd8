// The API fuzzer: requests generated from GET /v0/openapi.json (requests.ts) sent one after another to a real server
// whose fuzzing tenant holds one object of every kind, each answer checked (checks.ts), and every refused write
// checked to have changed nothing its route can read. Used by the test (a seeded few hundred) and the benchmark
// (`npm run bench -- fuzz`, ten thousand). A failure names the seed, the request's index and the request.
import { request } from 'node:http';
import SwaggerParser from '@apidevtools/swagger-parser';
import fc from 'fast-check';
import { KINDS } from '../../src/kinds/index.js';
import { SAMPLES } from '../../src/kinds/samples.js';
import type { TestServer } from '../../src/test-support/server.js';
import { newTenant } from '../../src/test-support/tenants.js';
import { type Answer, AnswerChecker } from './checks.js';
import {
  type DocOperation,
  type FuzzContext,
  type FuzzRequest,
  operationsOf,
  requestsOf,
} from './requests.js';

/** A request that has not answered by then is a hang (a followed log that streams is cut and counted as such). */
const ANSWER_TIMEOUT_MS = 15_000;
/** How long a streaming answer (a followed log) is read before it is cut. */
const STREAM_READ_MS = 300;
/** Requests generated per batch (fc.sample holds a batch in memory; huge bodies are among them). */
const BATCH = 200;
/** What the fuzzing tenant's sandboxes get: small, and few (the workspace's quotas bound what fuzzed creates start). */
const SANDBOX_MEMORY_MB = 256;
/** Fields that change by themselves between two reads: run state, status the controllers write, usage. */
const VOLATILE = new Set([
  'status',
  'events',
  'state',
  'lastUsedAt',
  'expiresIn',
  'expired',
  'resourceVersion',
  'updatedAt',
  'updated_at',
  'activeRevision',
  'usage',
  'used',
]);

export interface FuzzReport {
  seed: number;
  sent: number;
  byStatus: Record<string, number>;
  serverErrors: number;
  /** Refused writes whose route's reads were compared before and after. */
  refusedWritesChecked: number;
  failures: string[];
}

export interface FuzzOptions {
  server: TestServer;
  runs: number;
  seed: number;
  /** Called every `every` requests with the count so far (the benchmark's progress line). */
  progress?: (sent: number) => void;
}

/** The server settings a fuzzed server runs with: small quotas bound what random creates can start. */
export const FUZZ_SERVER_ENV = {
  BERTH_LOG_LEVEL: 'fatal',
  BERTH_QUOTA_SANDBOXES: '6',
  BERTH_QUOTA_MEMORY_MB: '4096',
  BERTH_QUOTA_BUILDS: '1',
  BERTH_STANDBY_AFTER: '3600',
};

/** Every name the fuzzer resolves outward is a documentation address (RFC 5737): refused, nothing leaves the host. */
export const fuzzLookup = async () => ['192.0.2.1'];

interface Sent {
  answer: Answer;
}

function send(base: string, r: Pick<FuzzRequest, 'method' | 'url' | 'headers' | 'body'>): Promise<Sent> {
  return new Promise((resolve, reject) => {
    // The length always said: node:http sends a GET's or DELETE's body unframed otherwise.
    const headers =
      r.body === undefined
        ? r.headers
        : { ...r.headers, 'content-length': String(Buffer.byteLength(r.body)) };
    const req = request(`${base}${r.url}`, { method: r.method, headers }, (res) => {
      const chunks: Buffer[] = [];
      let streaming = false;
      const contentType = String(res.headers['content-type'] ?? '');
      const done = () =>
        resolve({
          answer: {
            status: res.statusCode ?? 0,
            contentType,
            text: Buffer.concat(chunks).toString('utf8'),
            streaming,
          },
        });
      const cut = setTimeout(() => {
        streaming = true;
        res.destroy();
        done();
      }, STREAM_READ_MS);
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        clearTimeout(cut);
        done();
      });
      res.on('error', () => undefined);
    });
    req.setTimeout(ANSWER_TIMEOUT_MS, () =>
      req.destroy(new Error(`no answer within ${ANSWER_TIMEOUT_MS} ms`)),
    );
    req.on('error', reject);
    req.end(r.body);
  });
}

/** The request as a line a person can replay. */
export function describeRequest(r: FuzzRequest): string {
  const body =
    r.body === undefined
      ? ''
      : ` body(${r.bodyKind}, ${Buffer.byteLength(r.body)} bytes) ${
          typeof r.body === 'string' ? r.body.slice(0, 400) : r.body.subarray(0, 64).toString('hex')
        }`;
  const headers = Object.fromEntries(
    Object.entries(r.headers).map(([k, v]) => [k, v.length > 80 ? `${v.slice(0, 40)}…(${v.length})` : v]),
  );
  return `${r.method} ${r.url.length > 300 ? `${r.url.slice(0, 300)}…` : r.url} ${JSON.stringify(headers)}${body}`;
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

/** The segments of a template path match those of a concrete one (a `{param}` matches any segment). */
function matches(template: string[], concrete: string[]) {
  return (
    template.length === concrete.length && template.every((t, i) => t.startsWith('{') || t === concrete[i])
  );
}

/**
 * The GET routes that read what a write to `url` could change: the item itself and every collection above it
 * (a refused PUT of /sandboxes/x must leave /sandboxes and /sandboxes/x as they were).
 */
function readsOf(gets: DocOperation[], url: string): string[] {
  const path = url.slice('/v0'.length).split('?')[0];
  const segs = path.split('/').slice(1);
  const out: string[] = [];
  for (let n = 1; n <= segs.length; n++) {
    const prefix = segs.slice(0, n);
    if (gets.some((g) => matches(g.path.split('/').slice(1), prefix))) out.push(`/v0/${prefix.join('/')}`);
  }
  return out;
}

/**
 * The operation that serves a request: the router removes dot segments (`%2e` too) and ignores a trailing slash, so
 * `/v0/templates/.` is the list of templates, not a template named `.`. The request's own operation when none other
 * matches (the answer is then a 404 or 405, judged against it).
 */
function servedBy(ops: DocOperation[], r: FuzzRequest, own: DocOperation): DocOperation {
  const segs: string[] = [];
  for (const seg of r.url.split('?')[0].split('/').slice(1)) {
    const dots = seg.replace(/%2e/gi, '.');
    if (dots === '.') continue;
    if (dots === '..') segs.pop();
    else segs.push(seg);
  }
  if (segs.at(-1) === '') segs.pop();
  if (segs[0] !== 'v0') return own;
  const path = segs.slice(1);
  let best: DocOperation | undefined;
  let literals = -1;
  for (const o of ops) {
    if (o.method !== r.method) continue;
    const t = o.path.split('/').slice(1);
    if (!matches(t, path)) continue;
    const n = t.filter((x) => !x.startsWith('{')).length;
    if (n > literals) [best, literals] = [o, n];
  }
  return best ?? own;
}

/** The fuzzing tenant: its own workspace, one object of every kind, and the sub-resources that hang off them. */
async function setUp(s: TestServer): Promise<FuzzContext> {
  const t = await newTenant(s, 'fuzz-home');
  const asT = { key: t.key };
  const known: Record<string, string[]> = {};
  const ok = async (what: string, r: Promise<Response>) => {
    const res = await r;
    const text = await res.text();
    if (!res.ok) throw new Error(`fuzz set-up: ${what} answered ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
  for (const kd of KINDS) {
    const sample = SAMPLES[kd.kind];
    const body: any = structuredClone(sample.valid);
    if (kd.kind === 'Sandbox') body.spec.runtime = { ...body.spec.runtime, memory: SANDBOX_MEMORY_MB };
    if (kd.metadataInput?.externalId) body.metadata.externalId = 'fz-ext';
    let i = 0;
    const coll = kd.path.replace(/\{\w+\}/g, () => sample.parents[i++]);
    await ok(`create ${kd.kind}`, s.api(coll, { method: 'POST', json: body, ...asT }));
    known[kd.nameParam] = [body.metadata.name];
    for (const [j, p] of (kd.parents ?? []).entries()) known[p.param] ??= [sample.parents[j]];
  }
  known.externalId = ['fz-ext'];
  const sandbox = known.sandboxName[0];
  const preview = known.previewName[0];
  const token = await ok(
    'preview token',
    s.api(`/sandboxes/${sandbox}/previews/${preview}/tokens`, {
      method: 'POST',
      json: { spec: { expiresAt: new Date(Date.now() + 86_400_000).toISOString() } },
      ...asT,
    }),
  );
  known.tokenName = [token.metadata.name];
  const schedule = await ok(
    'schedule',
    s.api(`/sandboxes/${sandbox}/schedules`, {
      method: 'POST',
      json: { type: 'cron', value: '0 0 1 1 *', input: { command: 'true' } },
      ...asT,
    }),
  );
  known.scheduleId = [schedule.id];
  await ok(
    'volume template version',
    s.api(`/volume_templates/${known.volumeTemplateName[0]}/versions/v1`, {
      method: 'PUT',
      json: {},
      ...asT,
    }),
  );
  known.versionName = ['v1'];
  // Another account and workspace of the tenant's, so that deletes aimed at them leave the fuzzer its own.
  const sa = await ok(
    'service account',
    s.api('/service_accounts', { method: 'POST', json: { name: 'fz-robot', role: 'viewer' }, ...asT }),
  );
  const key = await ok(
    'api key',
    s.api(`/service_accounts/${sa.client_id}/api_keys`, { method: 'POST', json: { name: 'k' }, ...asT }),
  );
  known.clientId = [sa.client_id];
  known.apiKeyId = [key.id];
  known.subject = [sa.client_id];
  await ok('workspace', s.api('/workspaces', { method: 'POST', json: { name: 'fz-other' }, ...asT }));
  known.workspaceName = ['fz-other'];
  const templates = await ok('templates', s.api('/templates', asT));
  known.templateName = [templates[0].name];
  known.revisionId = ['latest'];
  known.executionId = ['fz-exec'];
  known.taskIndex = ['0'];
  known.imageName = ['blaxel%2Fbase-image%3Alatest'];
  return { key: t.key, workspace: t.home, known };
}

export async function runFuzz(opts: FuzzOptions): Promise<FuzzReport> {
  const { server, runs, seed } = opts;
  const raw = await (await server.api('/openapi.json', { key: null })).json();
  const doc: any = await SwaggerParser.dereference(structuredClone(raw));
  const ops = operationsOf(doc);
  const gets = ops.filter((o) => o.method === 'GET');
  const byId = new Map(ops.map((o) => [o.operationId, o]));
  const ctx = await setUp(server);
  const checker = new AnswerChecker();
  const report: FuzzReport = {
    seed,
    sent: 0,
    byStatus: {},
    serverErrors: 0,
    refusedWritesChecked: 0,
    failures: [],
  };
  const arb = requestsOf(ops, ctx);
  const snapshot = async (urls: string[], headers: Record<string, string>) => {
    const out: Record<string, unknown> = {};
    const h = Object.fromEntries(Object.entries(headers).filter(([k]) => k !== 'content-type'));
    for (const url of urls) {
      const answer = await send(server.url, { method: 'GET', url, headers: h }).then(
        (x) => x.answer,
        (err: Error) => ({ status: 0, text: err.message }),
      );
      let body: unknown = answer.text;
      try {
        body = JSON.parse(answer.text);
      } catch {}
      out[url] = { status: answer.status, body: stable(body) };
    }
    return JSON.stringify(out);
  };
  for (let batch = 0; report.sent < runs; batch++) {
    const n = Math.min(BATCH, runs - report.sent);
    const requests = fc.sample(arb, { numRuns: n, seed: seed + batch });
    for (const [i, r] of requests.entries()) {
      const index = report.sent;
      const op = servedBy(ops, r, byId.get(r.operationId)!);
      const write = r.method !== 'GET';
      const reads = write ? readsOf(gets, r.url) : [];
      const before = write ? await snapshot(reads, r.headers) : '';
      let answer: Answer;
      try {
        answer = (await send(server.url, r)).answer;
      } catch (err) {
        report.failures.push(
          `#${index} (seed ${seed}, batch ${batch}, item ${i}) ${(err as Error).message}\n  ${describeRequest(r)}`,
        );
        report.sent++;
        continue;
      }
      report.sent++;
      report.byStatus[answer.status] = (report.byStatus[answer.status] ?? 0) + 1;
      if (answer.status >= 500) report.serverErrors++;
      const wrong = checker.check(op, answer);
      if (wrong)
        report.failures.push(
          `#${index} (seed ${seed}, batch ${batch}, item ${i}) ${op.operationId}: ${wrong}\n  ${describeRequest(r)}\n  -> ${answer.status} ${answer.contentType} ${answer.text.slice(0, 500)}`,
        );
      if (write && answer.status >= 400 && answer.status < 500) {
        report.refusedWritesChecked++;
        const after = await snapshot(reads, r.headers);
        if (after !== before)
          report.failures.push(
            `#${index} (seed ${seed}, batch ${batch}, item ${i}) ${r.operationId}: a refused write (${answer.status}) changed what ${reads.join(', ')} read\n  ${describeRequest(r)}\n  before ${before.slice(0, 600)}\n  after  ${after.slice(0, 600)}`,
          );
      }
      if (opts.progress && report.sent % 500 === 0) opts.progress(report.sent);
    }
  }
  return report;
}
