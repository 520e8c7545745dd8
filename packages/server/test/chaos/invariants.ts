// What must hold once a chaos run's load stopped and its controllers settled: every acknowledged write present,
// every sandbox running or saying why not, no runtime instance without an owner (nor more replicas than allowed),
// the token budget not exceeded at the provider, every job execution ended with its attempts counted right, and
// every fault explained on its object.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { EXPLAINED_BY, type Fault } from './faults.js';
import { AGENT, BUDGET, CALL_MAX_TOKENS, exec, JOB, type LoadContext, providerCalls } from './load.js';

export interface Verdict {
  checked: Record<string, number>;
  violations: string[];
  /** Faults injected (not skipped) and how many an event explains, by kind. */
  explained: Record<string, { injected: number; explained: number }>;
  /** Each fault no event explained, with the last events of its object. */
  unexplained: string[];
  /** `GET /v0/<kind>/{name}/debug` of the first target of each kind of fault: the cause it named, and how fast. */
  debug: { fault: string; object: string; cause: string; tookMs: number }[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const FINAL = ['succeeded', 'failed', 'cancelled'];

/** Polls `probe` until it returns undefined (settled) or `ms` pass; returns the last thing it said was wrong. */
async function until(ms: number, probe: () => Promise<string | undefined>): Promise<string | undefined> {
  const end = Date.now() + ms;
  for (;;) {
    const wrong = await probe();
    if (!wrong || Date.now() > end) return wrong;
    await sleep(500);
  }
}

export async function verify(ctx: LoadContext, faults: Fault[], settleMs = 60_000): Promise<Verdict> {
  const { s, acked } = ctx;
  const v: Verdict = { checked: {}, violations: [], explained: {}, unexplained: [], debug: [] };
  const bad = (m: string) => v.violations.push(m);
  const tick = (what: string, n = 1) => {
    v.checked[what] = (v.checked[what] ?? 0) + n;
  };
  const all = async (path: string) => {
    const a = await s.settled('GET', `${path}?limit=1000`);
    return Array.isArray(a.body) ? (a.body as any[]) : [];
  };

  // Sandboxes: each one asked for is DEPLOYED and running (a request wakes one found dead), or FAILED saying why.
  const wrongSandbox = async () => {
    const wrong: string[] = [];
    for (const o of await all('/v0/sandboxes')) {
      const name = o.metadata.name;
      if (o.status === 'FAILED') {
        if (!o.events?.some((e: any) => e.status === 'FAILED' && e.message))
          wrong.push(`${name} FAILED with no reason`);
        continue;
      }
      if (o.status !== 'DEPLOYED') {
        wrong.push(`${name} is ${o.status}`);
        continue;
      }
      const p = await s.call('GET', `/run/default/sandboxes/${name}/process`);
      if (p.status !== 200)
        wrong.push(
          `${name} is DEPLOYED but answers ${p.status} ${p.text.slice(0, 200)}; its last events ${JSON.stringify((o.events ?? []).slice(-3).map((e: any) => `${e.time} ${e.message}`))}`,
        );
    }
    return wrong.length ? wrong.join('; ') : undefined;
  };
  const sandboxes = await until(settleMs, wrongSandbox);
  if (sandboxes) bad(`sandboxes: ${sandboxes}`);
  const now = await all('/v0/sandboxes');
  tick('sandboxes', now.length);

  // Acknowledged creates and deletes.
  const names = new Set(now.map((o) => o.metadata.name));
  for (const n of acked.sandboxesCreated)
    if (!acked.sandboxesDeleted.has(n) && !acked.sandboxesDeleteUnknown.has(n) && !names.has(n))
      bad(`sandbox ${n} was created (200) and is gone`);
  for (const n of acked.sandboxesDeleted)
    if (names.has(n)) bad(`sandbox ${n} was deleted (200) and is still listed`);
  tick('acknowledged sandbox creates and deletes', acked.sandboxesCreated.size + acked.sandboxesDeleted.size);

  // Every acknowledged volume record, in the volume after every restart of its sandbox.
  if (acked.volumeRecords.length) {
    const r = await exec(ctx, 'chaos-vol-box', 'cat /data/log');
    const lines = new Set(String(r.body?.stdout ?? '').split('\n'));
    const lost = acked.volumeRecords.filter((n) => !lines.has(`rec-${n}`));
    if (r.status !== 200) bad(`the volume could not be read: ${r.status} ${r.text.slice(0, 200)}`);
    else if (lost.length)
      bad(`${lost.length} acknowledged volume records lost: ${lost.slice(0, 10).join(', ')}`);
    tick('acknowledged volume records', acked.volumeRecords.length);
  }

  // Job executions: ended, each task's attempts within its retries (attempts lost with a killed server excepted).
  const execWrong = async () => {
    for (const id of acked.executions) {
      const e = await s.call('GET', `/v0/jobs/${JOB.name}/executions/${id}`);
      if (!FINAL.includes(e.body?.status)) return `execution ${id} is ${e.body?.status}`;
    }
    return undefined;
  };
  const unfinished = await until(settleMs, execWrong);
  if (unfinished) bad(unfinished);
  for (const id of acked.executions) {
    const tasks = (await s.settled('GET', `/v0/jobs/${JOB.name}/executions/${id}/tasks`)).body;
    for (const t of Array.isArray(tasks) ? tasks : []) {
      const lost = (t.conditions ?? []).filter((c: any) => c.reason === 'lost').length;
      if (t.attempts > JOB.maxRetries + 1 + lost)
        bad(
          `execution ${id} task ${t.index}: ${t.attempts} attempts for ${JOB.maxRetries} retries (${lost} lost)`,
        );
      const recorded = (t.conditions ?? []).filter((c: any) => c.type === 'Attempt').length;
      if (recorded !== Math.min(t.attempts, 10))
        bad(`execution ${id} task ${t.index}: ${t.attempts} attempts but ${recorded} recorded`);
      if (t.status === 'succeeded' && t.conditions?.at(-1)?.reason !== 'succeeded')
        bad(
          `execution ${id} task ${t.index} succeeded but its last attempt says ${t.conditions?.at(-1)?.reason}`,
        );
      tick('job tasks');
    }
  }

  // The budget, judged at the provider: every call that reached it wrote CALL_MAX_TOKENS output tokens. Windows are
  // durable (decision 057), so the bound holds across every kill of the server (a run across midnight UTC spans
  // two of the budget's daily windows).
  const served = providerCalls(ctx.fake);
  tick('model calls that reached the provider', served);
  const windows = new Date(ctx.startedAt).getUTCDate() === new Date().getUTCDate() ? 1 : 2;
  if (served * CALL_MAX_TOKENS > windows * BUDGET.outputTokens)
    bad(
      `the budget of ${BUDGET.outputTokens} output tokens was exceeded: ${served} calls of ${CALL_MAX_TOKENS} reached the provider across ${s.kills} server kills`,
    );

  // Runtime instances: each owned by an object that exists; no more replicas than the agent's maxScale.
  const instancesWrong = async () => {
    const dir = join(s.dataDir, 'sandboxes');
    const ids = existsSync(dir) ? readdirSync(dir) : [];
    const live = new Set((await all('/v0/sandboxes')).map((o) => `default.${o.metadata.name}`));
    const wrong: string[] = [];
    for (const id of ids) {
      if (id.startsWith('default.')) {
        if (!live.has(id)) wrong.push(`instance ${id} has no sandbox`);
      } else if (id.startsWith('job-') || id.startsWith('bld-'))
        wrong.push(`instance ${id} left by a job or build`);
      else if (!id.startsWith('wl-')) wrong.push(`instance ${id} belongs to nothing`);
    }
    const replicas = ids.filter((id) => id.startsWith('wl-')).length;
    if (replicas > AGENT.maxScale) wrong.push(`${replicas} replicas for a maxScale of ${AGENT.maxScale}`);
    return wrong.length ? wrong.join('; ') : undefined;
  };
  const orphans = await until(settleMs, instancesWrong);
  if (orphans) bad(orphans);
  tick('runtime instances');

  // Faults explained: an event on the target after the fault says what happened.
  for (const f of faults) {
    if (f.skipped) continue;
    v.explained[f.kind] ??= { injected: 0, explained: 0 };
    const e = v.explained[f.kind];
    e.injected++;
    const pattern = EXPLAINED_BY[f.kind];
    if (!pattern || !f.target) continue;
    const path = f.target.kind === 'Agent' ? `/v0/agents/${f.target.name}` : `/v0/sandboxes/${f.target.name}`;
    // The event may come a sweep after the fault (a daemon that ended with no request reaching it).
    let o: any;
    const said = () => o?.events?.some((x: any) => x.time >= f.at.slice(0, 19) && pattern.test(x.message));
    await until(settleMs, async () => {
      o = (await s.settled('GET', path)).body;
      return said() ? undefined : 'not yet';
    });
    if (!v.debug.some((d) => d.fault === f.kind)) {
      const d = await s.settled('GET', `${path}/debug`);
      if (d.status !== 200 || !d.body?.cause)
        bad(`${path}/debug answered ${d.status}: ${d.text.slice(0, 200)}`);
      else v.debug.push({ fault: f.kind, object: path, cause: d.body.cause, tookMs: d.body.tookMs });
    }
    if (said()) e.explained++;
    else
      v.unexplained.push(
        `${f.kind} at ${f.at} on ${path}: ${JSON.stringify((o?.events ?? []).slice(-4).map((x: any) => `${x.time} ${x.message}`))}`,
      );
  }
  return v;
}
