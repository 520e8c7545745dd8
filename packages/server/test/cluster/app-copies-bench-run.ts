// How long a second node takes to have an agent's built app: copied from the node that built it, against building it
// itself (bench/cluster/app-copies.mjs, docs/decisions/094-built-apps-across-nodes.md), printed as one JSON line.
// APP_COPIES_RUNS times, each on two fresh two-server clusters on one PostgreSQL (builds ahead off, so nothing is had
// ahead): the agent template (APP_COPIES_TEMPLATE, default agent-typescript: npm ci and tsc from each server's seeded
// dependency cache) deployed through the leader with one replica slot (on the leader, which builds it), then set to
// minScale 2; the time from that write's answer to the app's plan file on node-b (the app had: copied or built), and
// to node-b serving the agent. Once with node-b copying (the default) and once with BERTH_APP_COPIES=false on node-b
// (it builds the app itself, as before decision 094), in alternating order. Node-b's copy time as its log says it,
// and the leader's build (BUILDING to BUILT events) are reported beside.
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { seedNodeCache } from '../../src/test-support/dependency-cache.js';
import { startPostgres } from '../../src/test-support/postgres.js';
import { removeSandboxesIn } from '../../src/test-support/sandboxes.js';
import { berth } from '../berth-cli.js';
import { serve, stopped } from '../serve-process.js';

const RUNS = Number(process.env.APP_COPIES_RUNS ?? 3);
const REPO = join(import.meta.dirname, '../../../..');
const AGENT = process.env.APP_COPIES_TEMPLATE ?? 'agent-typescript';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Sample {
  haveMs: number;
  servingMs: number;
  /** Node-b's own figure of the copy (its log), when it copied. */
  copyMs?: number;
  /** The leader's build of the same app (its BUILDING and BUILT events). */
  leaderBuildMs: number;
  load: number;
}

const pg = await startPostgres();
const work = mkdtempSync(join(tmpdir(), 'berth-app-copies-bench-'));
cpSync(join(REPO, 'templates', AGENT), join(work, AGENT), { recursive: true });

async function once(copies: boolean): Promise<Sample> {
  const env = {
    BERTH_DATABASE_URL: await pg.database(),
    BERTH_MASTER_KEY: randomBytes(32).toString('base64'),
    BERTH_NODE_LEASE_S: '2',
    BERTH_BUILDS_AHEAD: 'false',
  };
  const dirs = ['a', 'b'].map((id) => mkdtempSync(join(tmpdir(), `berth-app-copies-${id}-`)));
  const a = await serve(dirs[0], { ...env, BERTH_NODE_ID: 'node-a' });
  const key = readFileSync(join(dirs[0], 'admin.key'), 'utf8').trim();
  const b = await serve(dirs[1], {
    ...env,
    BERTH_NODE_ID: 'node-b',
    ...(copies ? {} : { BERTH_APP_COPIES: 'false' }),
  });
  const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  try {
    // After the start: a server removes the builds of workspaces the store does not list yet.
    if (AGENT !== 'agent-python') for (const d of dirs) seedNodeCache(d, 'default', join(work, AGENT), REPO);
    const d = await berth({ url: a.url, adminKey: key }, ['deploy', join(work, AGENT)]);
    if (d.code !== 0) throw new Error(d.out);
    let o: any;
    for (let i = 0; ; i++) {
      o = await (await fetch(`${a.url}/v0/agents/${AGENT}`, { headers: auth })).json();
      if (o.status === 'DEPLOYED') break;
      if (i > 1200) throw new Error(`not deployed: ${JSON.stringify(o.events?.slice(-3))}`);
      await sleep(100);
    }
    const at = (s: string) => Date.parse(o.events.find((e: any) => e.status === s)?.time);
    const leaderBuildMs = at('BUILT') - at('BUILDING');
    const app = o.revisions.find((r: any) => r.id === o.activeRevision).app as string;
    const plan = join(dirs[1], 'builds/workspaces/default/apps', `${app}.json`);
    const load = Number(loadavg()[0].toFixed(1));
    const spec = { ...o.spec, runtime: { ...o.spec.runtime, minScale: 2 } };
    const put = await fetch(`${a.url}/v0/agents/${AGENT}`, {
      method: 'PUT',
      headers: auth,
      body: JSON.stringify({ metadata: { name: AGENT }, spec }),
    });
    if (!put.ok) throw new Error(await put.text());
    const t = performance.now();
    let haveMs = -1;
    for (;;) {
      if (haveMs < 0 && existsSync(plan)) haveMs = performance.now() - t;
      if (haveMs >= 0) {
        const list = (await (await fetch(`${a.url}/v0/nodes`, { headers: auth })).json()) as any[];
        if (list.some((n) => n.id === 'node-b' && (n.serving ?? []).includes(`Agent/default/${AGENT}`)))
          break;
      }
      if (performance.now() - t > 180_000) throw new Error('node-b never served the agent in 180 s');
      await sleep(20);
    }
    const servingMs = performance.now() - t;
    const log = readFileSync(join(dirs[1], 'builds/workspaces/default/logs', `${app}.log`), 'utf8');
    const copied = log.match(/berth: copied from \S+ \(archive \S+, \d+ bytes, (\d+) ms\)/);
    if (copies !== !!copied)
      throw new Error(`node-b ${copies ? 'did not copy' : 'copied'}: ${log.slice(-300)}`);
    return {
      haveMs: Math.round(haveMs),
      servingMs: Math.round(servingMs),
      ...(copied ? { copyMs: Number(copied[1]) } : {}),
      leaderBuildMs,
      load,
    };
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

const runs: { copied: Sample; built: Sample }[] = [];
try {
  for (let run = 0; run < RUNS; run++) {
    // Alternating which goes first, so a load that drifts during the run weighs on both alike.
    const first = run % 2 === 0;
    const x = await once(first);
    const y = await once(!first);
    runs.push(first ? { copied: x, built: y } : { copied: y, built: x });
  }
  console.log(JSON.stringify({ template: AGENT, runs }));
} finally {
  rmSync(work, { recursive: true, force: true });
  await pg.stop();
}
