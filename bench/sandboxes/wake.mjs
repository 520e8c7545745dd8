// bench/sandboxes wake: a request to an HTTP server inside a sandbox in standby, reached through Berth at
// /port/{n}/ (the gateway thaws the sandbox while holding the request). Baselines in the same run: the same
// request to the running sandbox, and the raw cgroup thaw alone; the daemon's own /health the same way.
// Target p50 <= 1 ms, p99 <= 5 ms.
import { header, row } from '../lib/report.mjs';
import { percentile, startSandboxBerth, timed } from './lib.mjs';

const N = Number(process.env.BENCH_WAKES ?? 100);
const PORT = 8000;
const SERVER = `node -e "require('http').createServer((q, s) => s.end('ok')).listen(${PORT}, '127.0.0.1')"`;

export async function benchWake() {
  // 300 ms of idleness puts the sandbox to standby: cycles stay short, yet the run-state writes of one
  // cycle (deferred 100 ms after each change) are over before the next wake-up is measured.
  const berth = await startSandboxBerth({ BERTH_STANDBY_AFTER: process.env.BENCH_STANDBY_AFTER ?? '0.3' });
  const { createLinuxDriver } = await import('../../packages/server/dist/runtime/index.js');
  const driver = await createLinuxDriver({ dataDir: berth.dataDir, netPoolSize: 0 });
  try {
    await berth.create('wake-bench');
    const base = berth.sandboxPath('wake-bench');
    await berth.call('POST', `${base}/process`, { command: SERVER, name: 'web', waitForPorts: [PORT] });
    const id = 'default.wake-bench';
    const get = (path, expect) => async () => {
      const res = await berth.pool.request({
        method: 'GET',
        path: `${base}${path}`,
        headers: { authorization: `Bearer ${berth.key}` },
      });
      const text = await res.body.text();
      if (res.statusCode !== 200 || !text.includes(expect))
        throw new Error(`GET ${path} answered ${res.statusCode}: ${text}`);
    };
    const frozen = async () => {
      for (;;) {
        if ((await driver.inspect(id))?.state === 'frozen') return;
        await new Promise((r) => setTimeout(r, 2));
      }
    };
    const measure = async (fn) => {
      for (let i = 0; i < 50; i++) await fn(); // warm-up
      const running = [];
      for (let i = 0; i < N; i++) running.push(await timed(fn));
      const waking = [];
      for (let i = 0; i < N; i++) {
        await frozen();
        waking.push(await timed(fn));
      }
      return { running, waking };
    };
    const port = await measure(get(`/port/${PORT}/`, 'ok'));
    const health = await measure(get('/health', 'activeKeepAlive'));
    const thaw = [];
    for (let i = 0; i < N; i++) {
      await frozen();
      // Berth's own freeze() polls for the frozen state every millisecond; thawing before it has seen it
      // would leave it waiting (and logging a timeout), so let it finish first.
      await new Promise((r) => setTimeout(r, 20));
      const cg = driver.cgroup(id);
      thaw.push(await timed(async () => cg.thaw()));
      await get('/health', 'ok')(); // lets the gateway see it running again
    }
    header(
      `sandboxes: wake from standby (${N} requests each through Berth; baseline: the same request, sandbox running)`,
    );
    row(
      `GET /port/${PORT}/ in standby p50`,
      percentile(port.waking, 50),
      percentile(port.running, 50),
      'ms',
      '<= 1 ms',
    );
    row(
      `GET /port/${PORT}/ in standby p99`,
      percentile(port.waking, 99),
      percentile(port.running, 99),
      'ms',
      '<= 5 ms',
    );
    row('GET /health in standby p50', percentile(health.waking, 50), percentile(health.running, 50), 'ms');
    row('GET /health in standby p99', percentile(health.waking, 99), percentile(health.running, 99), 'ms');
    row(
      'raw cgroup thaw p50 (baseline: running /health)',
      percentile(thaw, 50),
      percentile(health.running, 50),
      'ms',
    );
    row(
      'raw cgroup thaw p99 (baseline: running /health)',
      percentile(thaw, 99),
      percentile(health.running, 99),
      'ms',
    );
    await berth.removeAll();
    return { p50: percentile(port.waking, 50), p99: percentile(port.waking, 99) };
  } finally {
    await driver.close();
    await berth.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchWake();
