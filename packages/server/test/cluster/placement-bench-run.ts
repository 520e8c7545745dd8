// The figures of cluster placement (bench/cluster/placement.mjs, docs/decisions/059-cluster-placement.md), printed as
// one JSON line:
// - a placement decision (`place` of the cluster's view: best of two over the healthy nodes of the sandbox's region,
//   preferring those with a warm sandbox, by the load the
//   placement index keeps), p50/p99 over PLACE_DECISIONS calls, beside a least-loaded scan of every node (same run);
// - a request to a sandbox through a server that is not its node beside the same request through its node: two
//   `berth serve` processes on one PostgreSQL database, the sandbox daemon's `/health` through the gateway,
//   FORWARD_REQUESTS each, interleaved, on keep-alive connections.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { instanceHolder } from '../../src/cluster/instance-holder.js';
import type { Leadership } from '../../src/cluster/leadership.js';
import type { NodeView, Nodes } from '../../src/cluster/nodes.js';
import { type Candidate, loadScore, SandboxPlacements } from '../../src/cluster/placement.js';
import { startPostgres } from '../../src/test-support/postgres.js';
import { removeSandboxesIn } from '../../src/test-support/sandboxes.js';
import { SqliteStore } from '../../src/store/sqlite.js';
import { serve, stopped } from '../serve-process.js';

const DECISIONS = Number(process.env.PLACE_DECISIONS ?? 100_000);
const REQUESTS = Number(process.env.FORWARD_REQUESTS ?? 2000);
const NODES = Number(process.env.PLACE_NODES ?? 100);

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

async function decisions() {
  const dir = mkdtempSync(join(tmpdir(), 'berth-place-bench-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  try {
    const views: NodeView[] = Array.from({ length: NODES }, (_, i) => ({
      id: `node-${i}`,
      address: `http://10.0.0.${i}:8080`,
      // Two regions; a third of the nodes hold a warm sandbox of the default image (decision 077).
      region: `r${i % 2}`,
      regions: [`r${i % 2}`],
      cores: 8,
      memoryMb: 32_768,
      instances: 0,
      warm: { default: i % 3 === 0 ? 1 : 0 },
      leads: i === 0 ? ['controllers'] : [],
      epoch: 1,
      startedAt: '',
      heartbeatAt: '',
      healthy: true,
      leased: true,
      stopped: false,
      drained: false,
    }));
    // Ten sandboxes a node, spread unevenly, as the index reads them from the store.
    const ops = Array.from({ length: NODES * 10 }, (_, i) => ({
      op: 'create' as const,
      key: { kind: 'Sandbox', workspace: 'default', parent: '', name: `s${i}` },
      body: {
        metadata: { name: `s${i}` },
        spec: { runtime: { memory: 256 * (1 + (i % 4)) } },
        status: 'DEPLOYED',
        node: `node-${(i * 7919) % NODES}`,
      },
    }));
    await store.write(ops);
    const placements = new SandboxPlacements(store);
    await placements.start();
    const nodes: Nodes = {
      self: views[0],
      list: async () => views,
      beat: async () => undefined,
      drain: async () => undefined,
      handOver: async () => undefined,
      close: async () => undefined,
      fence: () => ({ node: views[0].id, epoch: 1 }),
      refused: () => undefined,
    };
    const leadership: Leadership = {
      lead: async () => undefined,
      leads: () => ['controllers'],
      fence: () => undefined,
      refused: () => undefined,
      close: async () => {},
    };
    const holder = await instanceHolder({
      nodes,
      leadership,
      placements,
      role: 'controllers',
      warn: () => {},
    });
    const body = { spec: { region: 'r1', runtime: { memory: 256 } } };
    const candidates: Candidate[] = views;
    const scan = () => {
      let best: string | undefined;
      let score = Number.POSITIVE_INFINITY;
      for (const c of candidates) {
        const s = loadScore(c, placements.load(c.id));
        if (s < score) {
          score = s;
          best = c.id;
        }
      }
      return best;
    };
    const time = (fn: () => unknown) => {
      const out: number[] = [];
      for (let i = 0; i < 10_000; i++) fn();
      for (let i = 0; i < DECISIONS; i++) {
        const t = performance.now();
        fn();
        out.push(performance.now() - t);
      }
      return out;
    };
    const place = time(() => holder.place(body));
    const full = time(scan);
    holder.close();
    placements.close();
    return {
      nodes: NODES,
      sandboxes: NODES * 10,
      placeP50: pct(place, 50),
      placeP99: pct(place, 99),
      scanP50: pct(full, 50),
      scanP99: pct(full, 99),
    };
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function forwarding() {
  const pg = await startPostgres();
  const env = {
    BERTH_DATABASE_URL: await pg.database(),
    BERTH_MASTER_KEY: randomBytes(32).toString('base64'),
    BERTH_STANDBY_AFTER: '600',
  };
  const procs: { id: string; dir: string; child: import('node:child_process').ChildProcess; url: string }[] =
    [];
  const pools: Pool[] = [];
  try {
    for (const id of ['node-a', 'node-b']) {
      const dir = mkdtempSync(join(tmpdir(), `berth-place-bench-${id}-`));
      procs.push({ id, dir, ...(await serve(dir, { ...env, BERTH_NODE_ID: id })) });
    }
    const key = readFileSync(join(procs[0].dir, 'admin.key'), 'utf8').trim();
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const r = await fetch(`${procs[0].url}/v0/sandboxes`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ metadata: { name: 'fwd' }, spec: { runtime: { memory: 2048 } } }),
    });
    const sb = await r.json();
    if (r.status !== 200 || sb.status !== 'DEPLOYED') throw new Error(`create: ${JSON.stringify(sb)}`);
    const own = procs.find((p) => p.id === sb.node);
    const other = procs.find((p) => p.id !== sb.node);
    if (!own || !other) throw new Error(`placed on ${sb.node}`);
    const ownPool = new Pool(own.url, { connections: 1 });
    const otherPool = new Pool(other.url, { connections: 1 });
    pools.push(ownPool, otherPool);
    const once = async (pool: Pool) => {
      const t = performance.now();
      const res = await pool.request({ method: 'GET', path: '/run/default/sandboxes/fwd/health', headers });
      await res.body.text();
      if (res.statusCode !== 200) throw new Error(`health: ${res.statusCode}`);
      return performance.now() - t;
    };
    for (let i = 0; i < 200; i++) {
      await once(ownPool);
      await once(otherPool);
    }
    const direct: number[] = [];
    const via: number[] = [];
    for (let i = 0; i < REQUESTS; i++) {
      direct.push(await once(ownPool));
      via.push(await once(otherPool));
    }
    await fetch(`${procs[0].url}/v0/sandboxes/fwd`, { method: 'DELETE', headers });
    return {
      requests: REQUESTS,
      ownP50: pct(direct, 50),
      viaP50: pct(via, 50),
      ownP99: pct(direct, 99),
      viaP99: pct(via, 99),
    };
  } finally {
    for (const p of pools) await p.close();
    for (const p of procs) {
      p.child.kill('SIGTERM');
      await stopped(p.child);
      await removeSandboxesIn(p.dir);
      rmSync(p.dir, { recursive: true, force: true });
    }
    await pg.stop();
  }
}

const d = await decisions();
const f = await forwarding();
console.log(JSON.stringify({ ...d, ...f }));
