// The mixed load of the chaos and soak runs, each part a loop until the run ends, tolerant of the faults (a failed
// call is counted and the loop goes on) and keeping what it was acknowledged, for the checks afterwards: sandboxes
// created, used (exec, files) and deleted; a volume appended to; model calls under a token budget; an MCP session;
// a preview under traffic; job executions with retries; an agent under bursts that scale it up and down.
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import yazl from 'yazl';
import type { FakeProvider } from '../../src/test-support/fake-provider.js';
import type { ChaosServer } from './server.js';

/** Small sandboxes: a run starts many. */
export const MEMORY_MB = 256;
export const BUDGET = { name: 'chaos-budget', outputTokens: 1000 };
export const CALL_MAX_TOKENS = 50;
export const JOB = { name: 'chaos-job', maxRetries: 2, tasks: 3 };
export const AGENT = { name: 'chaos-agent', maxScale: 3 };
const TEMPLATES = join(import.meta.dirname, '../../../../templates');

export interface Acked {
  sandboxesCreated: Set<string>;
  sandboxesDeleted: Set<string>;
  /** Deletes that got no answer (the server was killed meanwhile): the sandbox may or may not remain. */
  sandboxesDeleteUnknown: Set<string>;
  volumeRecords: number[];
  executions: string[];
}

export interface LoadContext {
  s: ChaosServer;
  fake: FakeProvider;
  running: () => boolean;
  /** The run's seeded random numbers in [0, 1): the same seed picks the same faults, targets and bursts. */
  rng: () => number;
  acked: Acked;
  /** When the load started (the budget's daily window it falls in). */
  startedAt: number;
  counts: Record<string, number>;
  /** Something a part could not set up: the run cannot judge that part. */
  problems: string[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const count = (ctx: LoadContext, what: string) => {
  ctx.counts[what] = (ctx.counts[what] ?? 0) + 1;
};
const run = (name: string) => `/run/default/sandboxes/${name}`;

/** Sets something up, retried through faults; the answer must be 2xx in the end. */
async function must(ctx: LoadContext, what: string, method: string, path: string, json?: unknown) {
  for (let i = 0; i < 20; i++) {
    const a = await ctx.s.settled(method, path, json);
    if (a.status >= 200 && a.status < 300) return a.body;
    if (a.status === 409 && method === 'POST')
      return (await ctx.s.settled('GET', `${path}/${json && (json as any).metadata?.name}`)).body;
    await sleep(500);
  }
  throw new Error(`chaos set-up: ${what} never succeeded`);
}

export async function exec(ctx: LoadContext, sandbox: string, command: string) {
  return ctx.s.call('POST', `${run(sandbox)}/process`, { command, waitForCompletion: true });
}

export const sandboxSpec = (extra: Record<string, unknown> = {}) => ({
  runtime: { memory: MEMORY_MB },
  lifecycle: { terminatedRetention: '0s' },
  ...extra,
});

/** Sandboxes made, used and deleted, one after another. */
export async function sandboxChurn(ctx: LoadContext, worker: number) {
  for (let n = 0; ctx.running(); n++) {
    const name = `churn-${worker}-${n}`;
    const c = await ctx.s.call('POST', '/v0/sandboxes', { metadata: { name }, spec: sandboxSpec() });
    if (c.status !== 200) {
      count(ctx, `sandbox create failed (${c.status})`);
      await sleep(200);
      continue;
    }
    ctx.acked.sandboxesCreated.add(name);
    count(ctx, 'sandbox created');
    const e = await exec(ctx, name, `echo ${n} > /tmp/n && cat /tmp/n`);
    count(ctx, e.status === 200 && e.body.stdout === `${n}\n` ? 'sandbox exec' : 'sandbox exec failed');
    const path = `${run(name)}/filesystem/${encodeURIComponent('/home/user/note.txt')}`;
    const w = await ctx.s.call('PUT', path, { content: `note ${n}` });
    const r = w.status === 200 ? await ctx.s.call('GET', path) : w;
    count(ctx, r.status === 200 && r.body?.content === `note ${n}` ? 'sandbox file' : 'sandbox file failed');
    const d = await ctx.s.call('DELETE', `/v0/sandboxes/${name}`);
    if (d.status === 200) ctx.acked.sandboxesDeleted.add(name);
    else if (d.status === 0) ctx.acked.sandboxesDeleteUnknown.add(name);
    count(ctx, d.status === 200 ? 'sandbox deleted' : 'sandbox delete failed');
  }
}

/** A sandbox appending records to its volume; each record acknowledged by a finished, successful exec. */
export async function volumeWriter(ctx: LoadContext) {
  await must(ctx, 'the volume', 'POST', '/v0/volumes', {
    metadata: { name: 'chaos-vol' },
    spec: { size: 64 },
  });
  await must(ctx, 'the volume sandbox', 'POST', '/v0/sandboxes', {
    metadata: { name: 'chaos-vol-box' },
    spec: sandboxSpec({ volumes: [{ name: 'chaos-vol', mountPath: '/data' }] }),
  });
  for (let n = 1; ctx.running(); n++) {
    const e = await exec(ctx, 'chaos-vol-box', `echo rec-${n} >> /data/log && sync /data/log`);
    if (e.status === 200 && e.body.exitCode === 0) {
      ctx.acked.volumeRecords.push(n);
      count(ctx, 'volume record');
    } else {
      count(ctx, 'volume record failed');
      await sleep(200);
    }
    await sleep(50);
  }
}

/** Chat calls to a model under a budget of output tokens: every call asks for CALL_MAX_TOKENS. */
/** Calls that reached the provider's chat endpoint. */
export const providerCalls = (fake: FakeProvider) =>
  fake.requests.filter((r) => r.path.endsWith('/chat/completions')).length;

export async function modelCalls(ctx: LoadContext) {
  await must(ctx, 'the connection', 'POST', '/v0/integrations/connections', {
    metadata: { name: 'chaos-llm' },
    spec: { integration: 'openai', config: { baseUrl: ctx.fake.url }, secret: { apiKey: 'sk-chaos' } },
  });
  await must(ctx, 'the budget', 'POST', '/v0/policies', {
    metadata: { name: BUDGET.name },
    spec: { type: 'maxToken', maxTokens: { output: BUDGET.outputTokens, granularity: 'day' } },
  });
  await must(ctx, 'the model', 'POST', '/v0/models', {
    metadata: { name: 'chaos-model' },
    spec: {
      integrationConnections: ['chaos-llm'],
      policies: [BUDGET.name],
      runtime: { type: 'openai', model: 'gpt-4o-mini' },
    },
  });
  while (ctx.running()) {
    const a = await ctx.s.call('POST', '/run/default/models/chaos-model/v1/chat/completions', {
      messages: [{ role: 'user', content: 'Hello' }],
      max_tokens: CALL_MAX_TOKENS,
    });
    count(
      ctx,
      a.status === 200 ? 'model call' : a.status === 429 ? 'model call over budget' : 'model call failed',
    );
    await sleep(a.status === 429 ? 500 : 100);
  }
}

/** An MCP client of a sandbox's /mcp: connects, lists and calls tools, connects again after a failure. */
export async function mcpSession(ctx: LoadContext) {
  await must(ctx, 'the MCP sandbox', 'POST', '/v0/sandboxes', {
    metadata: { name: 'chaos-mcp' },
    spec: sandboxSpec(),
  });
  while (ctx.running()) {
    const client = new Client({ name: 'chaos', version: '1.0.0' });
    try {
      const transport = new StreamableHTTPClientTransport(new URL(`${ctx.s.url}${run('chaos-mcp')}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${ctx.s.key}` } },
      });
      await client.connect(transport);
      count(ctx, 'mcp session');
      while (ctx.running()) {
        const r: any = await client.callTool({ name: 'processExecute', arguments: { command: 'echo mcp' } });
        count(ctx, r.isError ? 'mcp call failed' : 'mcp call');
        await sleep(200);
      }
    } catch {
      count(ctx, 'mcp session broken');
      await sleep(500);
    } finally {
      await client.close().catch(() => undefined);
    }
  }
}

/** A web server in a sandbox under a network policy (the egress proxy runs for it), reached through a preview. */
export async function previewTraffic(ctx: LoadContext) {
  await must(ctx, 'the web sandbox', 'POST', '/v0/sandboxes', {
    metadata: { name: 'chaos-web' },
    spec: sandboxSpec({ network: { allowedDomains: ['example.invalid'] } }),
  });
  const start = () =>
    ctx.s.call('POST', `${run('chaos-web')}/process`, {
      name: 'web',
      command: 'python3 -m http.server 8000',
      workingDir: '/tmp',
      waitForPorts: [8000],
    });
  await start();
  const p = await must(ctx, 'the preview', 'POST', '/v0/sandboxes/chaos-web/previews', {
    metadata: { name: 'web' },
    spec: { port: 8000, public: true },
  });
  const path = new URL(p.spec.url ?? p.metadata.url).pathname;
  while (ctx.running()) {
    const a = await ctx.s.call('GET', path);
    count(ctx, a.status === 200 ? 'preview request' : `preview request failed (${a.status})`);
    if (a.status !== 200) count(ctx, `preview failure: ${a.status} ${why(a)}`);
    // A daemon killed takes the web server with it: started again in the fresh sandbox.
    if (a.status === 502) await start();
    await sleep(150);
  }
}

/** What a refusal says, without the names and figures that vary (to count alike ones together). */
const why = (a: { body: any; text: string }) =>
  String(a.body?.detail ?? a.body?.title ?? a.text ?? '')
    .slice(0, 100)
    .replace(/\d+/g, 'N');

function zip(files: Record<string, string>): Promise<Buffer> {
  const z = new yazl.ZipFile();
  for (const [name, body] of Object.entries(files)) z.addBuffer(Buffer.from(body), name);
  z.end();
  const chunks: Buffer[] = [];
  return new Promise((resolve, reject) => {
    z.outputStream.on('data', (c: Buffer) => chunks.push(c));
    z.outputStream.on('end', () => resolve(Buffer.concat(chunks)));
    z.outputStream.on('error', reject);
  });
}

async function uploadCode(ctx: LoadContext, path: string, body: Buffer) {
  let last = '';
  for (let i = 0; i < 20; i++) {
    try {
      // Through a restart under way, as every call of the load (a kill mid-upload is retried).
      const res = await fetch(`${await ctx.s.ready()}${path}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${ctx.s.key}`, 'content-type': 'application/zip' },
        body: new Uint8Array(body),
      });
      if (res.ok) return;
      last = `${res.status} ${(await res.text()).slice(0, 300)}`;
    } catch (err) {
      last = String(err);
    }
    await sleep(500);
  }
  throw new Error(`chaos set-up: uploading ${path} never succeeded (last answer: ${last})`);
}

async function untilDeployed(ctx: LoadContext, path: string, ms = 180_000) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const a = await ctx.s.call('GET', path);
    if (a.body?.status === 'DEPLOYED') return;
    if (a.body?.status === 'FAILED')
      throw new Error(`${path} FAILED: ${JSON.stringify(a.body.events?.at(-1))}`);
    await sleep(250);
  }
  throw new Error(`${path} never DEPLOYED`);
}

/** Job executions whose even tasks fail their first attempt: retried, up to JOB.maxRetries. */
export async function jobRuns(ctx: LoadContext) {
  await must(ctx, 'the job', 'POST', '/v0/jobs', {
    metadata: { name: JOB.name },
    spec: { runtime: { memory: MEMORY_MB, maxRetries: JOB.maxRetries, maxConcurrentTasks: 2, timeout: 60 } },
  });
  const main = [
    'import os, sys, time',
    'time.sleep(0.5)',
    "first = os.environ.get('BL_TASK_ATTEMPT') == '1'",
    "print('task', os.environ.get('TASK_INDEX'), 'attempt', os.environ.get('BL_TASK_ATTEMPT'), flush=True)",
    "sys.exit(1 if first and int(os.environ.get('TASK_INDEX', '0')) % 2 == 0 else 0)",
  ].join('\n');
  await uploadCode(ctx, `/v0/jobs/${JOB.name}/code`, await zip({ 'main.py': `${main}\n` }));
  await untilDeployed(ctx, `/v0/jobs/${JOB.name}`);
  while (ctx.running()) {
    const a = await ctx.s.call('POST', `/v0/jobs/${JOB.name}/executions`, {
      tasks: Array.from({ length: JOB.tasks }, () => ({})),
    });
    if (a.status === 200) {
      ctx.acked.executions.push(a.body.executionId);
      count(ctx, 'job execution');
    } else count(ctx, 'job execution refused');
    // One at a time: wait for it to end (or the run to).
    for (let i = 0; i < 200 && ctx.running(); i++) {
      const e = await ctx.s.call('GET', `/v0/jobs/${JOB.name}/executions/${a.body?.executionId}`);
      if (['succeeded', 'failed', 'cancelled'].includes(e.body?.status)) break;
      await sleep(300);
    }
  }
}

/** The Python agent template under bursts of traffic (scaling out), then idle (scaling in). */
export async function agentTraffic(ctx: LoadContext) {
  await must(ctx, 'the agent', 'POST', '/v0/agents', {
    metadata: { name: AGENT.name },
    spec: { runtime: { memory: MEMORY_MB, minScale: 0, maxScale: AGENT.maxScale } },
  });
  const dir = mkdtempSync(join(tmpdir(), 'berth-chaos-agent-'));
  try {
    cpSync(join(TEMPLATES, 'agent-python'), dir, { recursive: true });
    const main = readFileSync(join(dir, 'main.py'), 'utf8');
    await uploadCode(ctx, `/v0/agents/${AGENT.name}/code`, await zip({ 'main.py': main }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  await untilDeployed(ctx, `/v0/agents/${AGENT.name}`);
  while (ctx.running()) {
    const burst = 1 + Math.floor(ctx.rng() * 6);
    const until = Date.now() + 2000;
    await Promise.all(
      Array.from({ length: burst }, async () => {
        while (Date.now() < until && ctx.running()) {
          const a = await ctx.s.call('POST', `/run/default/agents/${AGENT.name}`, { inputs: 'hello' });
          count(ctx, a.status === 200 ? 'agent request' : 'agent request failed');
        }
      }),
    );
    await sleep(3000);
  }
}
