// bench/agents cold start: the first call to an echo agent after it scaled to zero (idle past
// BERTH_REPLICA_REMOVE_AFTER), on two servers in the same run: one with BERTH_REPLICA_RETENTION=0 (the replica is
// removed, so the call starts a new one from zero: sandbox, daemon, `node index.js`, its port) and one with the
// replica kept frozen (decision 090: the call wakes it), each beside a warm request right after, and the app's own
// start on the host. Target (issue): the first call after scale to zero <= 150 ms p50. The wake from standby of a
// replica between requests is measured by bench/agents/bench.mjs.
import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { loadavg } from 'node:os';
import { header, row } from '../lib/report.mjs';
import { BENCH_MEMORY_MB, percentile, startSandboxBerth, timed } from '../sandboxes/lib.mjs';
import { deployZip } from './deploy.mjs';

const STARTS = Number(process.env.BENCH_COLD_STARTS ?? 15);
/** The kept server's retention: longer than the bench; only scale to zero matters here. */
export const RETENTION_S = 3600;
export const ECHO =
  "require('http').createServer((q, s) => s.end('ok')).listen(process.env.PORT, process.env.HOST)";

/**
 * An app (the echo app unless `args` and `cwd` say another) started on the host until its port accepts a connection:
 * what the app's own start costs.
 */
export async function hostStart({ args = ['-e', ECHO], cwd = undefined } = {}) {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const t = performance.now();
  const child = spawn(process.execPath, args, {
    cwd,
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: 'ignore',
  });
  try {
    for (;;) {
      const ok = await new Promise((r) => {
        const c = connect(port, '127.0.0.1', () => {
          c.destroy();
          r(true);
        });
        c.on('error', () => r(false));
      });
      if (ok) return performance.now() - t;
      await new Promise((r) => setTimeout(r, 2));
    }
  } finally {
    child.kill('SIGKILL');
  }
}

/**
 * Waits until the workload's replica is gone (`retention` 0: removed at scale to zero, the old behaviour) or kept
 * frozen at scale to zero (decision 090: one replica sandbox, frozen, and the object counting no replica serving).
 */
export async function scaledToZero(berth, replicas, plural, name, kept) {
  for (let j = 0; j < 600; j++) {
    const left = await replicas();
    if (!kept && left.length === 0) return;
    if (kept && left.length === 1 && left[0].state === 'frozen') {
      const o = await berth.call('GET', `/v0/${plural}/${name}`);
      if (o.replicas === 0) return;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(kept ? 'the idle replica was never kept frozen' : 'the idle replica was never removed');
}

/** One server: `starts` first calls after a scale to zero, each followed by a warm call. */
async function coldRun(retentionS) {
  // Standby after 1 s, scale to zero after 2 s idle: each cycle waits ~3 s.
  const berth = await startSandboxBerth({
    BERTH_STANDBY_AFTER: '1',
    BERTH_REPLICA_REMOVE_AFTER: '2',
    BERTH_REPLICA_RETENTION: String(retentionS),
  });
  const { createLinuxDriver } = await import('../../packages/server/dist/runtime/index.js');
  const driver = await createLinuxDriver({ dataDir: berth.dataDir, netPoolSize: 0 });
  const replicas = async () => (await driver.list()).filter((i) => i.id.startsWith('wl-'));
  try {
    await deployZip(berth, 'agents', 'echo', {
      spec: { public: true, runtime: { memory: BENCH_MEMORY_MB, maxScale: 1, minScale: 0 } },
      files: { 'index.js': ECHO, 'package.json': '{"name":"echo","main":"index.js"}' },
    });
    const get = async () => {
      const res = await berth.pool.request({ method: 'GET', path: '/run/default/agents/echo' });
      const text = await res.body.text();
      if (text !== 'ok') throw new Error(`${res.statusCode} ${text}`);
    };
    const first = [];
    const warm = [];
    for (let i = 0; i < STARTS; i++) {
      await scaledToZero(berth, replicas, 'agents', 'echo', retentionS > 0);
      first.push(await timed(get));
      warm.push(await timed(get));
    }
    return { first, warm };
  } finally {
    await fetch(`${berth.url}/v0/agents/echo`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${berth.key}` },
    }).catch(() => undefined);
    for (let i = 0; i < 600 && (await replicas()).length > 0; i++)
      await new Promise((r) => setTimeout(r, 100));
    await driver.close();
    await berth.stop();
  }
}

export async function benchAgentsCold() {
  const load = loadavg()[0];
  // The old scale to zero (the replica removed: a cold start) and the new one (kept frozen: a wake), same run.
  const old = await coldRun(0);
  const kept = await coldRun(RETENTION_S);
  const alone = [];
  for (let i = 0; i < STARTS; i++) alone.push(await hostStart());
  header(
    `agents: first call after scale to zero (echo agent, ${BENCH_MEMORY_MB} MB, ${STARTS} each; load ${load.toFixed(2)}→${loadavg()[0].toFixed(2)})`,
  );
  row(
    'first call, kept frozen, p50 (vs removed: a cold start)',
    percentile(kept.first, 50),
    percentile(old.first, 50),
    'ms',
    '<= 150 ms',
  );
  row(
    'first call, kept frozen, p99 (vs removed)',
    percentile(kept.first, 99),
    percentile(old.first, 99),
    'ms',
  );
  row(
    'first call, kept frozen, p50 (vs a warm request)',
    percentile(kept.first, 50),
    percentile(kept.warm, 50),
    'ms',
  );
  row(
    'cold new replica (retention 0), p50 (vs the app on the host)',
    percentile(old.first, 50),
    percentile(alone, 50),
    'ms',
  );
  row(
    'cold new replica (retention 0), p90 (vs a warm request)',
    percentile(old.first, 90),
    percentile(old.warm, 90),
    'ms',
  );
}

if (import.meta.url === `file://${process.argv[1]}`) await benchAgentsCold();
