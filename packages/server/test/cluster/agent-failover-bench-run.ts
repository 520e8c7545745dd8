// The time an agent is down after kill -9 of the leader (bench/cluster/agent-failover.mjs,
// docs/decisions/067-builds-ahead.md), printed as one JSON line: AGENT_FAILOVER_RUNS times, two `berth serve` on one
// PostgreSQL, the stdlib-only agent template deployed through the leader; once the follower holds the agent's code (and
// reports its build ahead, where it does), the leader is killed and the agent is called through the follower every
// 100 ms until it answers 200. Each run on a fresh cluster, so no run finds an app built by an earlier one.
// AGENT_FAILOVER_TEMPLATE=agent-typescript: the TypeScript template (npm ci and tsc, from each server's dependency
// cache seeded as a build with network would have filled it) instead of the stdlib-only Python one.
// AGENT_FAILOVER_SPREAD=1 (decision 086): the agent asks for minScale 2, so its replicas run on both nodes; once both
// serve it, the leader is killed and the agent is called through the follower for 5 s: the longest time without an
// answer from the kill on (the answering gap) and the calls that failed are reported beside the first answer's time.
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
const SPREAD = process.env.AGENT_FAILOVER_SPREAD === '1';
const WATCH_MS = 5_000;
const REPO = join(import.meta.dirname, '../../../..');
const AGENT = process.env.AGENT_FAILOVER_TEMPLATE ?? 'agent-python';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const pg = await startPostgres();
const work = mkdtempSync(join(tmpdir(), 'berth-agent-failover-'));
cpSync(join(REPO, 'templates', AGENT), join(work, AGENT), { recursive: true });
const runs: { answeredMs: number; gapMs: number; failed: number; load: number }[] = [];
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
        // Built ahead, or copied ahead from the leader (decision 094).
        const m = [
          ...(await (await fetch(`${b.url}/metrics`)).text()).matchAll(
            /^berth_builds_ahead_total\{outcome="(?:built|copied)"\} (\d+)/gm,
          ),
        ];
        // The code before builds ahead reports none: the copy is what it waits for.
        if (copies.has('default', o.source.digest) && (!m.length || m.some((x) => Number(x[1]) > 0))) break;
        await sleep(100);
      }
      if (SPREAD) {
        const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
        const spec = { ...o.spec, runtime: { ...o.spec.runtime, minScale: 2 } };
        const put = await fetch(`${a.url}/v0/agents/${AGENT}`, {
          method: 'PUT',
          headers: auth,
          body: JSON.stringify({ metadata: { name: AGENT }, spec }),
        });
        if (!put.ok) throw new Error(await put.text());
        for (let i = 0; ; i++) {
          const list = (await (await fetch(`${b.url}/v0/nodes`, { headers: auth })).json()) as any[];
          if (list.filter((n) => (n.serving ?? []).includes(`Agent/default/${AGENT}`)).length === 2) break;
          if (i > 1200) throw new Error(`the agent never served on both nodes: ${JSON.stringify(list)}`);
          await sleep(100);
        }
      }
      const load = loadavg()[0];
      a.child.kill('SIGKILL');
      const t = performance.now();
      let answeredMs = -1;
      let last = t;
      let gapMs = 0;
      let failed = 0;
      for (;;) {
        const r = await call(b.url);
        await r?.arrayBuffer();
        const now = performance.now();
        if (r?.status === 200) {
          if (answeredMs < 0) answeredMs = now - t;
          gapMs = Math.max(gapMs, now - last);
          last = now;
          if (!SPREAD || now - t > WATCH_MS) break;
        } else failed++;
        if (now - t > 120_000) throw new Error('the agent did not answer again in 120 s');
        await sleep(SPREAD ? 20 : 100);
      }
      runs.push({
        answeredMs: Math.round(answeredMs),
        gapMs: Math.round(gapMs),
        failed,
        load: Number(load.toFixed(1)),
      });
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
  console.log(JSON.stringify({ template: AGENT, spread: SPREAD, runs }));
} finally {
  rmSync(work, { recursive: true, force: true });
  await pg.stop();
}
