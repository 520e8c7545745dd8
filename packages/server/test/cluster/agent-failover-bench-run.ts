// The time an agent is down after kill -9 of the leader (bench/cluster/agent-failover.mjs,
// docs/decisions/067-builds-ahead.md), printed as one JSON line: AGENT_FAILOVER_RUNS times, two `berth serve` on one
// PostgreSQL, the stdlib-only agent template deployed through the leader; once the follower holds the agent's code (and
// reports its build ahead, where it does), the leader is killed and the agent is called through the follower every
// 100 ms until it answers 200. Each run on a fresh cluster, so no run finds an app built by an earlier one.
// AGENT_FAILOVER_TEMPLATE=agent-typescript: the TypeScript template (npm ci and tsc, from each server's dependency
// cache seeded as a build with network would have filled it) instead of the stdlib-only Python one.
import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { CodeStore } from '../../src/builds/code-store.js';
import { seedNodeCache } from '../../src/test-support/dependency-cache.js';
import { startPostgres } from '../../src/test-support/postgres.js';
import { removeSandboxesIn } from '../../src/test-support/sandboxes.js';
import { berth } from '../berth-cli.js';
import { serve, stopped } from '../serve-process.js';

const RUNS = Number(process.env.AGENT_FAILOVER_RUNS ?? 3);
const REPO = join(import.meta.dirname, '../../../..');
const AGENT = process.env.AGENT_FAILOVER_TEMPLATE ?? 'agent-python';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const pg = await startPostgres();
const work = mkdtempSync(join(tmpdir(), 'berth-agent-failover-'));
cpSync(join(REPO, 'templates', AGENT), join(work, AGENT), { recursive: true });
const runs: { answeredMs: number; load: number }[] = [];
try {
  for (let run = 0; run < RUNS; run++) {
    const env = {
      BERTH_DATABASE_URL: await pg.database(),
      BERTH_MASTER_KEY: randomBytes(32).toString('base64'),
      BERTH_NODE_LEASE_S: '2',
    };
    const dirs = ['a', 'b'].map((id) => mkdtempSync(join(tmpdir(), `berth-agent-failover-${id}-`)));
    const a = await serve(dirs[0], { ...env, BERTH_NODE_ID: 'node-a' });
    const key = readFileSync(join(dirs[0], 'admin.key'), 'utf8').trim();
    const b = await serve(dirs[1], { ...env, BERTH_NODE_ID: 'node-b' });
    // After the start: a server removes the builds of workspaces the store does not list yet.
    if (AGENT !== 'agent-python') for (const d of dirs) seedNodeCache(d, 'default', join(work, AGENT), REPO);
    const call = (url: string) =>
      fetch(`${url}/run/default/agents/${AGENT}`, {
        method: 'POST',
        headers: { 'x-blaxel-authorization': `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ inputs: 'x' }),
        signal: AbortSignal.timeout(30_000),
      }).catch(() => undefined);
    try {
      const d = await berth({ url: a.url, adminKey: key }, ['deploy', join(work, AGENT)]);
      if (d.code !== 0) throw new Error(d.out);
      const o = (await (
        await fetch(`${a.url}/v0/agents/${AGENT}`, { headers: { authorization: `Bearer ${key}` } })
      ).json()) as any;
      const copies = new CodeStore(dirs[1]);
      for (let i = 0; i < 600; i++) {
        const m = (await (await fetch(`${b.url}/metrics`)).text()).match(
          /^berth_builds_ahead_total\{outcome="built"\} (\d+)/m,
        );
        // The code before builds ahead reports none: the copy is what it waits for.
        if (copies.has('default', o.source.digest) && (!m || Number(m[1]) > 0)) break;
        await sleep(100);
      }
      const load = loadavg()[0];
      a.child.kill('SIGKILL');
      const t = performance.now();
      for (;;) {
        const r = await call(b.url);
        await r?.arrayBuffer();
        if (r?.status === 200) break;
        if (performance.now() - t > 120_000) throw new Error('the agent did not answer again in 120 s');
        await sleep(100);
      }
      runs.push({ answeredMs: Math.round(performance.now() - t), load: Number(load.toFixed(1)) });
      await stopped(a.child);
    } finally {
      for (const p of [a, b])
        if (p.child.exitCode === null && p.child.signalCode === null) {
          p.child.kill('SIGTERM');
          await stopped(p.child);
        }
      for (const dir of dirs) {
        await removeSandboxesIn(dir);
        rmSync(dir, { recursive: true, force: true });
      }
    }
  }
  console.log(JSON.stringify({ template: AGENT, runs }));
} finally {
  rmSync(work, { recursive: true, force: true });
  await pg.stop();
}
