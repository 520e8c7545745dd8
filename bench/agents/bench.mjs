// bench/agents: an echo agent deployed from code, called through Berth's gateway beside the same replica called
// straight at its address (same run), and woken from standby beside the same request to an awake replica after
// the same idle gap. Targets (issue): routing p50 added <= 0.3 ms, throughput >= 80% of direct at 100
// connections; standby wake <= 5 ms added over a warm request. maxScale 1: one replica, so what is measured is
// the routing, not the autoscaler starting more (every start costs CPU on the same host).
import { createRequire } from 'node:module';
import { startScript } from '../lib/berth.mjs';
import { header, row } from '../lib/report.mjs';
import { BENCH_MEMORY_MB, percentile, startSandboxBerth, timed } from '../sandboxes/lib.mjs';
import { deployZip } from './deploy.mjs';

const require = createRequire(import.meta.url);
const autocannon = require('autocannon');
const DURATION_S = Number(process.env.BENCH_DURATION ?? 5);
const CONNECTIONS = 100;
const WAKES = Number(process.env.BENCH_WAKES ?? 50);
/** Standby delay of the bench server (seconds): short so wake cycles are quick. */
const STANDBY_AFTER_S = 1;
const GAP_MS = STANDBY_AFTER_S * 1000 + 300;
/** Rounds of routed / bare proxy / direct runs, interleaved so machine load hits all three alike. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1);
const BARE = new URL('../lib/bare-proxy.mjs', import.meta.url).pathname;
const ECHO = "require('http').createServer((q, s) => s.end('ok')).listen(process.env.PORT, process.env.HOST)";

const cannon = (opts) =>
  new Promise((resolve, reject) =>
    autocannon({ connections: CONNECTIONS, duration: DURATION_S, ...opts }, (err, res) =>
      err ? reject(err) : resolve(res),
    ),
  );

export async function benchAgents() {
  const berth = await startSandboxBerth({ BERTH_STANDBY_AFTER: String(STANDBY_AFTER_S) });
  const { createLinuxDriver } = await import('../../packages/server/dist/runtime/index.js');
  const driver = await createLinuxDriver({ dataDir: berth.dataDir, netPoolSize: 0 });
  const auth = { authorization: `Bearer ${berth.key}` };
  let keepAwake;
  let bare;
  try {
    const deployMs = await deployZip(berth, 'agents', 'echo', {
      spec: { public: true, runtime: { memory: BENCH_MEMORY_MB, maxScale: 1 } },
      files: { 'index.js': ECHO, 'package.json': '{"name":"echo","main":"index.js"}' },
    });
    const replica = (await driver.list()).find((i) => i.id.startsWith('wl-'));
    const direct = `http://${replica.address}:8080/`;
    const viaBerth = `${berth.url}/run/default/agents/echo`;
    // A bare undici proxy in front of the same replica: the least one Node hop costs on this machine.
    bare = await startScript(BARE, { TARGET: `http://${replica.address}:8080` });
    // Runs not through Berth would let the replica go to standby: one request through the gateway every 200 ms
    // keeps it awake (a negligible share of the load).
    keepAwake = setInterval(() => void fetch(viaBerth).catch(() => undefined), 200);
    for (const url of [viaBerth, `${bare.url}/`, direct]) await cannon({ url, duration: 1 });
    const runs = { routed: [], bare: [], straight: [] };
    for (let i = 0; i < ROUNDS; i++) {
      runs.routed.push(await cannon({ url: viaBerth }));
      runs.bare.push(await cannon({ url: `${bare.url}/` }));
      runs.straight.push(await cannon({ url: direct }));
    }
    clearInterval(keepAwake);
    for (const r of runs.routed)
      if (r.non2xx || r.errors) console.log(`through Berth: ${r.non2xx} non-2xx, ${r.errors} errors`);
    // The median round of each, by throughput.
    const mid = (rs) => [...rs].sort((a, b) => a.requests.average - b.requests.average)[rs.length >> 1];
    const [routed, viaBare, straight] = [mid(runs.routed), mid(runs.bare), mid(runs.straight)];

    const get = async () => {
      const res = await berth.pool.request({ method: 'GET', path: '/run/default/agents/echo' });
      const text = await res.body.text();
      if (text !== 'ok') throw new Error(`${res.statusCode} ${text}`);
    };
    const frozen = async () => {
      for (;;) {
        if ((await driver.inspect(replica.id))?.state === 'frozen') break;
        await new Promise((r) => setTimeout(r, 5));
      }
      await new Promise((r) => setTimeout(r, 20));
    };
    const woken = [];
    for (let i = 0; i < WAKES; i++) {
      await frozen();
      woken.push(await timed(get));
    }
    // Awake after the same gap: a request every GAP_MS/2 through the gateway keeps it from freezing meanwhile.
    const awake = [];
    for (let i = 0; i < WAKES; i++) {
      await get();
      await new Promise((r) => setTimeout(r, Math.min(GAP_MS, STANDBY_AFTER_S * 1000 - 200)));
      awake.push(await timed(get));
    }
    header(`agents: echo agent (autocannon ${CONNECTIONS} connections, ${DURATION_S}s; ${WAKES} wakes)`);
    row(
      'through Berth, p50 latency (vs direct to the replica)',
      routed.latency.p50,
      straight.latency.p50,
      'ms',
      '+<= 0.3 ms',
    );
    row(
      'through Berth, req/s (vs direct)',
      routed.requests.average,
      straight.requests.average,
      'req/s',
      '>= 0.8',
    );
    row('bare proxy, p50 latency (vs direct)', viaBare.latency.p50, straight.latency.p50, 'ms');
    row('bare proxy, req/s (vs direct)', viaBare.requests.average, straight.requests.average, 'req/s');
    row(
      'through Berth, req/s (vs the bare proxy)',
      routed.requests.average,
      viaBare.requests.average,
      'req/s',
    );
    row(
      'standby wake, p50 (vs awake after a gap)',
      percentile(woken, 50),
      percentile(awake, 50),
      'ms',
      '+<= 5 ms',
    );
    row('standby wake, p99 (vs awake after a gap)', percentile(woken, 99), percentile(awake, 99), 'ms');
    row('upload to DEPLOYED, no dependencies (vs itself)', deployMs, deployMs, 'ms');
  } finally {
    clearInterval(keepAwake);
    await bare?.stop();
    // Replicas outlive their server, and its data dir (their records) goes with it: remove them first.
    await fetch(`${berth.url}/v0/agents/echo`, { method: 'DELETE', headers: auth }).catch(() => undefined);
    for (let i = 0; i < 600 && (await driver.list()).some((s) => s.id.startsWith('wl-')); i++)
      await new Promise((r) => setTimeout(r, 100));
    await driver.close();
    await berth.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchAgents();
