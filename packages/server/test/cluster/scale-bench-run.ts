// The figures of a cluster on one machine (bench/cluster/scale.mjs, docs/decisions/063-cluster-flows.md), printed as
// one JSON line:
// - sandbox creates per second: SCALE_CREATES sandboxes created at once (SCALE_CONCURRENCY in flight), each answered
//   DEPLOYED, through three `berth serve` processes on one PostgreSQL (spread over them in turn, placed across the
//   three nodes) beside the same through one server on its own database;
// - failover: after kill -9 of the leader, the time until another server says it leads (polled every 20 ms), beside
//   the same after a clean stop (SIGTERM) of the next leader.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startPostgres, type TestPostgres } from '../../src/test-support/postgres.js';
import { removeSandboxesIn } from '../../src/test-support/sandboxes.js';
import { serve, stopped } from '../serve-process.js';

const CREATES = Number(process.env.SCALE_CREATES ?? 30);
const CONCURRENCY = Number(process.env.SCALE_CONCURRENCY ?? 6);
const MEMORY_MB = 128;

interface Proc {
  id: string;
  dir: string;
  child: import('node:child_process').ChildProcess;
  url: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function cluster(pg: TestPostgres, ids: string[]) {
  const env = {
    BERTH_DATABASE_URL: await pg.database(),
    BERTH_MASTER_KEY: randomBytes(32).toString('base64'),
    BERTH_NODE_LEASE_S: '2',
  };
  const procs: Proc[] = [];
  const start = async (id: string) => {
    const dir =
      procs.find((p) => p.id === id)?.dir ?? mkdtempSync(join(tmpdir(), `berth-scale-bench-${id}-`));
    const p = { id, dir, ...(await serve(dir, { ...env, BERTH_NODE_ID: id })) };
    const i = procs.findIndex((x) => x.id === id);
    if (i >= 0) procs[i] = p;
    else procs.push(p);
    return p;
  };
  await start(ids[0]);
  const key = readFileSync(join(procs[0].dir, 'admin.key'), 'utf8').trim();
  for (const id of ids.slice(1)) await start(id);
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  return {
    procs,
    start,
    headers,
    async leader(via: Proc): Promise<string | undefined> {
      const r = await fetch(`${via.url}/v0/nodes`, { headers }).catch(() => undefined);
      if (!r?.ok) return undefined;
      return ((await r.json()) as any[]).find((n) => n.healthy && n.leads.includes('controllers'))?.id;
    },
    async close() {
      for (const p of procs) {
        if (p.child.exitCode === null && p.child.signalCode === null) {
          p.child.kill('SIGTERM');
          await stopped(p.child);
        }
        await removeSandboxesIn(p.dir);
        rmSync(p.dir, { recursive: true, force: true });
      }
    },
  };
}

/** Creates CREATES sandboxes through the servers in turn, CONCURRENCY at once; creates per second. */
async function creates(c: Awaited<ReturnType<typeof cluster>>, label: string): Promise<number> {
  let next = 0;
  const one = async () => {
    for (let i = next++; i < CREATES; i = next++) {
      const p = c.procs[i % c.procs.length];
      const r = await fetch(`${p.url}/v0/sandboxes`, {
        method: 'POST',
        headers: c.headers,
        body: JSON.stringify({
          metadata: { name: `${label}-${i}` },
          spec: { runtime: { memory: MEMORY_MB } },
        }),
      });
      const sb = await r.json();
      if (r.status !== 200 || sb.status !== 'DEPLOYED')
        throw new Error(`create: ${r.status} ${JSON.stringify(sb)}`);
    }
  };
  const t = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, one));
  return CREATES / ((performance.now() - t) / 1000);
}

/** Stops the leader (`signal`) and times until another server leads. */
async function takeover(c: Awaited<ReturnType<typeof cluster>>, signal: NodeJS.Signals): Promise<number> {
  const id = await c.leader(c.procs[0]);
  const old = c.procs.find((p) => p.id === id);
  const via = c.procs.find((p) => p.id !== id);
  if (!old || !via) throw new Error(`no leader to stop: ${id}`);
  old.child.kill(signal);
  const t = performance.now();
  for (;;) {
    const now = await c.leader(via);
    if (now && now !== id) break;
    if (performance.now() - t > 30_000) throw new Error(`no server took over from ${id} in 30 s`);
    await sleep(20);
  }
  const ms = performance.now() - t;
  await stopped(old.child);
  // Back as a follower, as its supervisor would start it.
  await c.start(old.id);
  return ms;
}

const pg = await startPostgres();
try {
  const one = await cluster(pg, ['solo']);
  let single: number;
  try {
    single = await creates(one, 'solo');
  } finally {
    await one.close();
  }
  const three = await cluster(pg, ['node-a', 'node-b', 'node-c']);
  try {
    const spread = await creates(three, 'three');
    const killMs = await takeover(three, 'SIGKILL');
    const stopMs = await takeover(three, 'SIGTERM');
    console.log(
      JSON.stringify({
        creates: CREATES,
        concurrency: CONCURRENCY,
        threeServersPerS: spread,
        oneServerPerS: single,
        failoverKillMs: killMs,
        failoverStopMs: stopMs,
      }),
    );
  } finally {
    await three.close();
  }
} finally {
  await pg.stop();
}
