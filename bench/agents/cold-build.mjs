// bench/agents cold start beside a build (issue 28 item 6): the first call after a scale to zero (bench/agents/cold.mjs)
// at the MCP template's memory (512 MB), first on a quiet server, then while a second agent's build runs on the same
// server throughout every sampled call; on two servers one after the other in the same run: BERTH_REPLICA_RETENTION=0
// (the idle replica is removed, so each call starts one from zero: the old behaviour) and the replica kept frozen at
// scale to zero (decision 090: each call wakes it). The build is CPU- and disk-heavy the way `npm ci` + `tsc` are (a
// worker per core hashing, writing and syncing small files), so it runs as long as the bench needs, not as long as a
// registry takes; the bench deletes its agent at the end, which calls the build off. Beside each: the app's own start
// on the host (cold.mjs hostStart), quiet and beside the same build, so Berth's part is told apart from the app's.
// BENCH_COLD_APP=mcp uses the MCP template itself instead (its start imports the MCP SDK and zod). BENCH_COLD_DEEP=1
// adds a third server whose kept replica goes to deep standby (a 1 GB swap file under its data dir, switched on for
// the run and off at its end: swap is host-wide) before each quiet first call.
// Targets (issue): the first call after scale to zero <= 150 ms p50 quiet, <= 1 s beside a build.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { header, row } from '../lib/report.mjs';
import { percentile, startSandboxBerth, timed } from '../sandboxes/lib.mjs';
import { filesOf } from './build.mjs';
import { ECHO, hostStart, RETENTION_S, scaledToZero } from './cold.mjs';
import { deployZip, zipOf } from './deploy.mjs';

const STARTS = Number(process.env.BENCH_COLD_STARTS ?? 15);
const MCP_TEMPLATE = new URL('../../templates/mcp-typescript', import.meta.url).pathname;

/**
 * The app cold-started: the echo agent, or with BENCH_COLD_APP=mcp the MCP template itself, asked for its /health.
 * The template is built on the host (npm ci, tsc, then its dev dependencies pruned) and uploaded with its
 * node_modules and dist, so its Berth build installs nothing: a build sandbox may not reach the npm registry where
 * the host does. The same built copy is what the host starts for the app's own start.
 */
function appUnderTest(work) {
  if (process.env.BENCH_COLD_APP !== 'mcp')
    return {
      name: 'echo agent',
      plural: 'agents',
      object: 'echo',
      files: { 'index.js': ECHO, 'package.json': '{"name":"echo","main":"index.js"}' },
      path: '/run/default/agents/echo',
      host: {},
    };
  const dir = join(work, 'mcp');
  cpSync(MCP_TEMPLATE, dir, { recursive: true });
  const quiet = { cwd: dir, stdio: 'ignore' };
  execFileSync('npm', ['ci', '--no-audit', '--no-fund'], quiet);
  execFileSync('npx', ['tsc'], quiet);
  execFileSync('npm', ['prune', '--omit=dev', '--no-audit', '--no-fund'], quiet);
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  pkg.scripts = { start: pkg.scripts.start };
  writeFileSync(join(dir, 'package.json'), JSON.stringify(pkg));
  return {
    name: 'MCP template',
    plural: 'functions',
    object: 'mcp',
    files: filesOf(dir),
    path: '/run/default/functions/mcp/health',
    host: { args: ['dist/index.js'], cwd: dir },
  };
}
/** The MCP template's memory (templates/mcp-typescript/berth.toml): what a new user's MCP server runs with. */
const MEMORY_MB = 512;
/** BENCH_COLD_DEEP: the swap file for the deep-standby run, and the cgroup charge below which a replica counts as deep. */
const DEEP_SWAP_MB = 1024;
const DEEP_LEFT_MB = 8;

/**
 * The build script: a worker per core, each hashing (a compiler's CPU) and writing, syncing and deleting batches of
 * small files (a package manager's disk), until killed or BUILD_S seconds passed.
 */
const BUILD_JS = `
const { fork } = require('node:child_process');
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const end = Date.now() + Number(process.env.BUILD_S || 900) * 1000;
if (process.argv[2] !== 'worker') {
  console.log('burning on ' + os.availableParallelism() + ' workers');
  const kids = Array.from({ length: os.availableParallelism() }, (_, i) => fork(__filename, ['worker', String(i)]));
  let left = kids.length;
  for (const k of kids) k.on('exit', () => { if (--left === 0) fs.mkdirSync('dist', { recursive: true }); });
} else {
  const dir = 'scratch-' + process.argv[3];
  const buf = Buffer.alloc(1 << 20, 7);
  const small = Buffer.alloc(16 << 10, 1);
  for (let round = 0; Date.now() < end; round++) {
    const t = Date.now();
    while (Date.now() - t < 100) createHash('sha256').update(buf).digest();
    fs.mkdirSync(dir, { recursive: true });
    for (let i = 0; i < 200; i++) fs.writeFileSync(dir + '/f' + i, small);
    const fd = fs.openSync(dir + '/f0', 'r+');
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    fs.rmSync(dir, { recursive: true });
  }
}
`;

/**
 * One server (BERTH_REPLICA_RETENTION `retentionS`): `STARTS` first calls after a scale to zero quiet, then as many
 * while a second agent's build runs beside them, and the app's own start on the host beside the same build.
 */
async function runOnce(app, retentionS, deep = false) {
  const berth = await startSandboxBerth({
    BERTH_STANDBY_AFTER: '1',
    BERTH_REPLICA_REMOVE_AFTER: '2',
    BERTH_REPLICA_RETENTION: String(retentionS),
    // Deep: the kept replica's memory goes to a swap file Berth makes (host-wide while it is on; off at the end).
    ...(deep ? { BERTH_DEEP_STANDBY_AFTER: '1', BERTH_SWAP_MB: String(DEEP_SWAP_MB) } : {}),
  });
  const { createLinuxDriver } = await import('../../packages/server/dist/runtime/index.js');
  const driver = await createLinuxDriver({ dataDir: berth.dataDir, netPoolSize: 0 });
  const ids = async (prefix) => (await driver.list()).filter((i) => i.id.startsWith(prefix));
  const auth = { authorization: `Bearer ${berth.key}` };
  try {
    await deployZip(berth, app.plural, app.object, {
      spec: { public: true, runtime: { memory: MEMORY_MB, maxScale: 1, minScale: 0 } },
      files: app.files,
    });
    const get = async () => {
      const res = await berth.pool.request({ method: 'GET', path: app.path });
      const text = await res.body.text();
      if (res.statusCode !== 200) throw new Error(`${res.statusCode} ${text}`);
    };
    /** `n` first calls after a scale to zero, each checked by `during` before and after. */
    const colds = async (n, during = async () => undefined) => {
      const out = [];
      for (let i = 0; i < n; i++) {
        await scaledToZero(berth, () => ids('wl-'), app.plural, app.object, retentionS > 0);
        if (deep) await pushedOut((await ids('wl-'))[0].id);
        await during();
        out.push(await timed(get));
        await during();
      }
      return out;
    };

    /** Waits until the kept replica's cgroup is down to its kernel memory: deep standby (decision 058). */
    const pushedOut = async (id) => {
      for (let t = 0; t < 600; t++) {
        const st = await driver.stats(id);
        if (st && st.memoryBytes < DEEP_LEFT_MB * 1024 * 1024) return;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`the kept replica ${id} never went to deep standby`);
    };

    const loadQuiet = loadavg()[0];
    const quiet = await colds(STARTS);
    if (deep) return { quiet, loadQuiet };
    // The builder: no dependencies (no install step), a build script that runs until the bench deletes it.
    const put = await fetch(`${berth.url}/v0/agents/builder?upload=true`, {
      method: 'PUT',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({
        metadata: { name: 'builder' },
        spec: { runtime: { memory: MEMORY_MB } },
      }),
    });
    if (!put.ok) throw new Error(`PUT builder: ${put.status} ${await put.text()}`);
    const pkg = { name: 'builder', scripts: { build: 'node build.js', start: 'node index.js' } };
    const up = await fetch(put.headers.get('x-blaxel-upload-url'), {
      method: 'PUT',
      headers: { 'content-type': 'application/zip' },
      body: await zipOf({ 'package.json': JSON.stringify(pkg), 'build.js': BUILD_JS, 'index.js': ECHO }),
    });
    if (!up.ok) throw new Error(`upload builder: ${up.status} ${await up.text()}`);
    const logs = join(berth.dataDir, 'builds', 'workspaces', 'default', 'logs');
    const burning = () => {
      try {
        return readdirSync(logs).some((f) => /burning on/.test(readFileSync(join(logs, f), 'utf8')));
      } catch {
        return false;
      }
    };
    for (let i = 0; i < 600 && !burning(); i++) await new Promise((r) => setTimeout(r, 100));
    if (!burning()) throw new Error('the build never started its script');
    const building = async () => {
      if ((await ids('bld-')).length === 0) throw new Error('the build ended before the samples did');
    };
    /** CPU seconds the build's sandbox used so far (its cgroup's): it ran beside the samples, not only existed. */
    const buildCpu = async () =>
      (await ids('bld-')).reduce((t, i) => t + (driver.cgroup(i.id)?.stats().cpuSeconds ?? 0), 0);
    const loadBefore = loadavg()[0];
    const cpuBefore = await buildCpu();
    const wallBefore = performance.now();
    const loaded = await colds(STARTS, building);
    const hostLoaded = [];
    for (let i = 0; i < STARTS; i++) {
      await building();
      hostLoaded.push(await hostStart(app.host));
    }
    await building();
    const buildShare = (await buildCpu()) - cpuBefore;
    const wall = (performance.now() - wallBefore) / 1000;
    const loadAfter = loadavg()[0];

    return { quiet, loaded, hostLoaded, buildShare, wall, loadQuiet, loadBefore, loadAfter };
  } finally {
    for (const [plural, name] of [
      [app.plural, app.object],
      ['agents', 'builder'],
    ])
      await fetch(`${berth.url}/v0/${plural}/${name}`, { method: 'DELETE', headers: auth }).catch(
        () => undefined,
      );
    for (let i = 0; i < 600 && (await driver.list()).some((s) => /^(wl|bld)-/.test(s.id)); i++)
      await new Promise((r) => setTimeout(r, 100));
    await driver.close();
    if (deep)
      try {
        execFileSync('swapoff', [join(berth.dataDir, 'swap', 'berth.swap')], { stdio: 'ignore' });
      } catch {}
    await berth.stop();
  }
}

export async function benchAgentsColdBuild() {
  const work = mkdtempSync(join(tmpdir(), 'berth-bench-cold-build-'));
  try {
    const app = appUnderTest(work);
    const hostQuiet = [];
    for (let i = 0; i < STARTS; i++) hostQuiet.push(await hostStart(app.host));
    // The old scale to zero (removed: each first call is a cold start), then the new one (kept frozen: a wake).
    const old = await runOnce(app, 0);
    const kept = await runOnce(app, RETENTION_S);
    const deep = process.env.BENCH_COLD_DEEP ? await runOnce(app, RETENTION_S, true) : undefined;
    const loads = (r) =>
      `load ${r.loadQuiet.toFixed(2)} quiet, ${r.loadBefore.toFixed(2)}→${r.loadAfter.toFixed(2)} with the build`;
    header(
      `agents: first call after scale to zero, quiet and beside a build (${app.name}, ${MEMORY_MB} MB, ${STARTS} each; removed: ${loads(old)}; kept: ${loads(kept)})`,
    );
    const p = percentile;
    row(
      'kept frozen, quiet, p50 (vs removed: a cold start)',
      p(kept.quiet, 50),
      p(old.quiet, 50),
      'ms',
      '<= 150 ms',
    );
    row('kept frozen, quiet, p99 (vs removed)', p(kept.quiet, 99), p(old.quiet, 99), 'ms');
    row(
      'kept frozen, beside a build, p50 (vs removed)',
      p(kept.loaded, 50),
      p(old.loaded, 50),
      'ms',
      '<= 1000 ms',
    );
    row('kept frozen, beside a build, p99 (vs removed)', p(kept.loaded, 99), p(old.loaded, 99), 'ms');
    row(
      'kept frozen, quiet, p50 (vs the app started on the host)',
      p(kept.quiet, 50),
      p(hostQuiet, 50),
      'ms',
    );
    row('removed, quiet, p50 (vs the app started on the host)', p(old.quiet, 50), p(hostQuiet, 50), 'ms');
    row(
      'removed, beside a build, p50 (vs the app on the host beside it)',
      p(old.loaded, 50),
      p(old.hostLoaded, 50),
      'ms',
    );
    row('app on the host beside a build, p50 (vs quiet)', p(old.hostLoaded, 50), p(hostQuiet, 50), 'ms');
    if (deep) {
      row(
        `kept in deep standby, quiet, p50 (vs kept frozen) [load ${deep.loadQuiet.toFixed(2)}]`,
        p(deep.quiet, 50),
        p(kept.quiet, 50),
        'ms',
        '<= 150 ms',
      );
      row('kept in deep standby, quiet, p99 (vs kept frozen)', p(deep.quiet, 99), p(kept.quiet, 99), 'ms');
    }
    for (const [what, r] of [
      ['removed', old],
      ['kept', kept],
    ])
      console.log(
        `${what}: the build used ${r.buildShare.toFixed(1)} CPU s in the ${r.wall.toFixed(1)} s of samples beside it`,
      );
    if (process.env.BENCH_COLD_RAW)
      console.log(
        JSON.stringify({ old, kept, deep, hostQuiet }, (_, v) => (typeof v === 'number' ? Math.round(v) : v)),
      );
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchAgentsColdBuild();
