// bench/sandboxes wake: a request to an HTTP server inside a sandbox in standby, reached through Berth at
// /port/{n}/ (the gateway thaws the sandbox while holding the request). Target p50 <= 1 ms, p99 <= 5 ms.
//
// Baselines, same run:
//  - the floor: the raw cgroup thaw, then the same request sent straight to the sandbox's address, no Berth;
//  - the same request through Berth to a sandbox kept awake (a keepAlive process), after the same idle gap:
//    on a VM a request after a few hundred idle milliseconds costs more than one of a back-to-back series
//    (idle vCPUs, cold caches), with or without a freeze, so that is the fair "running" figure;
//  - the same request to the awake sandbox through a bare Node proxy (bench/lib/bare-proxy.mjs), same gap: what
//    any proxy hop costs here;
//  - the same request back to back (the warm figure), and the daemon's own /health the same ways.
import { Pool } from 'undici';
import { startScript } from '../lib/berth.mjs';
import { header, row } from '../lib/report.mjs';
import { percentile, startSandboxBerth, timed } from './lib.mjs';

const N = Number(process.env.BENCH_WAKES ?? 100);
/** Requests before measuring: the server's hot path is compiled by then, as on a server that has run a while. */
const WARM_UP = 1000;
const PORT = 8000;
const BARE_PROXY = new URL('../lib/bare-proxy.mjs', import.meta.url).pathname;
const SERVER = `node -e "require('http').createServer((q, s) => s.end('ok')).listen(${PORT}, '127.0.0.1')"`;
/** Idle time before standby (BENCH_STANDBY_AFTER, seconds): short, so cycles are quick. */
const STANDBY_AFTER_S = Number(process.env.BENCH_STANDBY_AFTER ?? 0.3);
/** Idle time before each request of the awake baseline: about what a standby cycle leaves (+ the freeze). */
const GAP_MS = STANDBY_AFTER_S * 1000 + 50;

export async function benchWake() {
  // 300 ms of idleness puts the sandbox to standby: cycles stay short, yet the run-state writes of one
  // cycle (deferred 100 ms after each change) are over before the next wake-up is measured.
  const berth = await startSandboxBerth({ BERTH_STANDBY_AFTER: String(STANDBY_AFTER_S) });
  const { createLinuxDriver } = await import('../../packages/server/dist/runtime/index.js');
  const driver = await createLinuxDriver({ dataDir: berth.dataDir, netPoolSize: 0 });
  let direct;
  let bare;
  try {
    await berth.create('wake-bench');
    await berth.create('awake-bench');
    const start = (name, keepAlive) =>
      berth.call('POST', `${berth.sandboxPath(name)}/process`, {
        command: SERVER,
        name: 'web',
        waitForPorts: [PORT],
        keepAlive,
      });
    await start('wake-bench', false);
    await start('awake-bench', true);
    const id = 'default.wake-bench';
    const get = (name, path, expect) => async () => {
      const res = await berth.pool.request({
        method: 'GET',
        path: `${berth.sandboxPath(name)}${path}`,
        headers: { authorization: `Bearer ${berth.key}` },
      });
      const text = await res.body.text();
      if (res.statusCode !== 200 || !text.includes(expect))
        throw new Error(`GET ${path} answered ${res.statusCode}: ${text}`);
    };
    const frozen = async () => {
      for (;;) {
        if ((await driver.inspect(id))?.state === 'frozen') break;
        await new Promise((r) => setTimeout(r, 2));
      }
      // Berth's freeze() polls for the frozen state every millisecond and a request arriving before it has seen
      // it waits for that freeze to finish: let it, so what is measured is a wake from standby, not a race.
      await new Promise((r) => setTimeout(r, 20));
    };
    const awakeAddress = (await driver.inspect('default.awake-bench')).address;
    bare = await startScript(BARE_PROXY, { TARGET: `http://${awakeAddress}:${PORT}` });
    const bareProxy = new Pool(bare.url);
    const viaBare = async () => {
      const res = await bareProxy.request({ method: 'GET', path: '/' });
      const text = await res.body.text();
      if (text !== 'ok') throw new Error(`the bare proxy answered ${res.statusCode}: ${text}`);
    };
    const measure = async (path, expect, withBare) => {
      const waking = get('wake-bench', path, expect);
      const awake = get('awake-bench', path, expect);
      for (let i = 0; i < WARM_UP; i++) {
        await awake();
        if (withBare) await viaBare();
      }
      const hot = [];
      for (let i = 0; i < N; i++) hot.push(await timed(awake));
      const gap = [];
      const bareGap = [];
      for (let i = 0; i < N; i++) {
        await new Promise((r) => setTimeout(r, GAP_MS));
        gap.push(await timed(awake));
        if (!withBare) continue;
        await new Promise((r) => setTimeout(r, GAP_MS));
        bareGap.push(await timed(viaBare));
      }
      const woken = [];
      for (let i = 0; i < N; i++) {
        await frozen();
        woken.push(await timed(waking));
      }
      return { hot, gap, bareGap, woken };
    };
    const port = await measure(`/port/${PORT}/`, 'ok', true);
    const health = await measure('/health', 'activeKeepAlive', false);
    await bareProxy.close();

    // The floor: thaw the cgroup ourselves and send the request straight to the sandbox's address.
    const info = await driver.inspect(id);
    direct = new Pool(`http://${info.address}:${PORT}`);
    const thaw = [];
    const floor = [];
    for (let i = 0; i < N; i++) {
      await frozen();
      const cg = driver.cgroup(id);
      floor.push(
        await timed(async () => {
          thaw.push(await timed(async () => cg.thaw()));
          const res = await direct.request({ method: 'GET', path: '/' });
          await res.body.text();
        }),
      );
      await get('wake-bench', '/health', 'ok')(); // lets the gateway see it running again
    }
    header(`sandboxes: wake from standby (${N} requests each; ${GAP_MS} ms idle gaps)`);
    const p = (xs, q) => percentile(xs, q);
    row(
      `standby, GET /port/${PORT}/ p50 (vs thaw + direct)`,
      p(port.woken, 50),
      p(floor, 50),
      'ms',
      '<= 1 ms',
    );
    row(
      `standby, GET /port/${PORT}/ p99 (vs thaw + direct)`,
      p(port.woken, 99),
      p(floor, 99),
      'ms',
      '<= 5 ms',
    );
    row(`standby, GET /port/${PORT}/ p50 (vs awake, same gap)`, p(port.woken, 50), p(port.gap, 50), 'ms');
    row(`awake, GET /port/${PORT}/ p50 (vs back to back)`, p(port.gap, 50), p(port.hot, 50), 'ms');
    row(
      `awake, GET /port/${PORT}/ p50 (vs bare proxy, same gap)`,
      p(port.gap, 50),
      p(port.bareGap, 50),
      'ms',
    );
    row('standby, GET /health p50 (vs awake, same gap)', p(health.woken, 50), p(health.gap, 50), 'ms');
    row('standby, GET /health p99 (vs awake, same gap)', p(health.woken, 99), p(health.gap, 99), 'ms');
    row('awake, GET /health p50 (vs back to back)', p(health.gap, 50), p(health.hot, 50), 'ms');
    row('raw cgroup thaw p50 (vs thaw + direct request)', p(thaw, 50), p(floor, 50), 'ms');
    await berth.removeAll();
    return { p50: p(port.woken, 50), p99: p(port.woken, 99) };
  } finally {
    await direct?.close();
    await bare?.stop();
    await driver.close();
    await berth.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchWake();
