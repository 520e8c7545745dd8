// bench/agents cold start: an echo agent whose replica was removed after idling (BERTH_REPLICA_REMOVE_AFTER), so
// the next request starts a new replica from zero (sandbox, daemon, `node index.js`, its port), beside the same
// request to the awake replica right after (same run). Target (issue): a cold new replica <= 150 ms. The wake
// from standby (<= 5 ms added) is measured by bench/agents/bench.mjs.
import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { header, row } from '../lib/report.mjs';
import { BENCH_MEMORY_MB, percentile, startSandboxBerth, timed } from '../sandboxes/lib.mjs';
import { deployZip } from './deploy.mjs';

const STARTS = Number(process.env.BENCH_COLD_STARTS ?? 15);
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

export async function benchAgentsCold() {
  // Standby after 1 s, removal after 2 s idle: each cycle waits ~3 s for the replica to go.
  const berth = await startSandboxBerth({ BERTH_STANDBY_AFTER: '1', BERTH_REPLICA_REMOVE_AFTER: '2' });
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
    const cold = [];
    const warm = [];
    for (let i = 0; i < STARTS; i++) {
      for (let j = 0; j < 600 && (await replicas()).length > 0; j++)
        await new Promise((r) => setTimeout(r, 50));
      if ((await replicas()).length > 0) throw new Error('the idle replica was never removed');
      cold.push(await timed(get));
      warm.push(await timed(get));
    }
    const alone = [];
    for (let i = 0; i < STARTS; i++) alone.push(await hostStart());
    header(`agents: cold start of a new replica (echo agent, ${BENCH_MEMORY_MB} MB, ${STARTS} starts)`);
    row(
      'cold new replica, p50 (vs a warm request)',
      percentile(cold, 50),
      percentile(warm, 50),
      'ms',
      '<= 150 ms',
    );
    row('cold new replica, p90 (vs a warm request)', percentile(cold, 90), percentile(warm, 90), 'ms');
    row('cold new replica, max (vs a warm request)', Math.max(...cold), Math.max(...warm), 'ms');
    row(
      'cold new replica, p50 (vs the app started on the host)',
      percentile(cold, 50),
      percentile(alone, 50),
      'ms',
    );
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

if (import.meta.url === `file://${process.argv[1]}`) await benchAgentsCold();
