// bench/jobs: one execution of N tasks that each run `true` (maxConcurrentTasks 50) through `berth serve`, from the
// POST to `succeeded`; baseline the same N sandboxes (same spec, the app bound at /app, `true` run by the daemon,
// then removed) spawned directly through the runtime driver by 50 workers in the same run. Figures: tasks/s, and the
// scheduling overhead per task as the server measures it (its own time in each slot, from a task's claim to the
// driver's create: what the direct baseline does not do; the slot is released when the process ends), next to
// the wall-time difference ((Berth time - direct time) × parallelism / N). Targets: overhead <= 20 ms/task,
// throughput >= 50% of direct.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yazl from 'yazl';
import { startBerth } from '../lib/berth.mjs';
import { header, row } from '../lib/report.mjs';

const N = Number(process.env.BENCH_JOB_TASKS ?? 1000);
const PARALLEL = 50;
/** Task sandboxes' memory: small, as batch tasks that run `true` need nothing. */
const MEMORY_MB = 256;
const PKG = JSON.stringify({ name: 'bench-true', version: '1.0.0', scripts: { start: 'true' } });

const zipOf = (files) =>
  new Promise((resolve, reject) => {
    const z = new yazl.ZipFile();
    for (const [name, text] of Object.entries(files)) z.addBuffer(Buffer.from(text), name);
    z.end();
    const chunks = [];
    z.outputStream.on('data', (c) => chunks.push(c));
    z.outputStream.on('end', () => resolve(Buffer.concat(chunks)));
    z.outputStream.on('error', reject);
  });

async function viaBerth() {
  // Info level: the runner logs its measured scheduling overhead when the execution ends.
  const berth = await startBerth({ BERTH_JOB_MAX_TASKS: String(PARALLEL), BERTH_LOG_LEVEL: 'info' });
  const h = { authorization: `Bearer ${berth.key}`, 'content-type': 'application/json' };
  const call = async (method, path, body) => {
    const res = await fetch(`${berth.url}/v0${path}`, {
      method,
      headers: h,
      body: body && JSON.stringify(body),
    });
    if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return { res, body: await res.json() };
  };
  try {
    const spec = {
      repository: { type: 'upload' },
      runtime: { memory: MEMORY_MB, maxConcurrentTasks: PARALLEL },
    };
    const { res } = await call('PUT', '/jobs/bench?upload=true', { metadata: { name: 'bench' }, spec });
    const up = await fetch(res.headers.get('x-blaxel-upload-url'), {
      method: 'PUT',
      headers: { 'content-type': 'application/zip' },
      body: await zipOf({ 'package.json': PKG }),
    });
    if (!up.ok) throw new Error(`upload: ${up.status} ${await up.text()}`);
    for (let i = 0; ; i++) {
      const { body } = await call('GET', '/jobs/bench');
      if (body.status === 'DEPLOYED') break;
      if (body.status === 'FAILED' || i > 1200)
        throw new Error(`job build: ${JSON.stringify(body.events?.at(-1))}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    // A warm-up execution opens the runtime (host setup) once, as the baseline's warm-up does.
    const warm = (await call('POST', '/jobs/bench/executions', { tasks: [{}] })).body.executionId;
    for (;;) {
      const { body } = await call('GET', `/jobs/bench/executions/${warm}`);
      if (body.status !== 'pending' && body.status !== 'running') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const t0 = performance.now();
    const id = (
      await call('POST', '/jobs/bench/executions', { tasks: Array.from({ length: N }, () => ({})) })
    ).body.executionId;
    let last;
    for (;;) {
      last = (await call('GET', `/jobs/bench/executions/${id}`)).body;
      if (last.status !== 'pending' && last.status !== 'running') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const ms = performance.now() - t0;
    if (last.status !== 'succeeded')
      throw new Error(`execution ${last.status}: ${JSON.stringify(last.stats)}`);
    return { ms, overheadMs: await loggedOverhead(berth, id) };
  } finally {
    await berth.stop();
  }
}

/** The runner's `job execution ended` line for the execution (written just after its end is stored). */
async function loggedOverhead(berth, id) {
  for (let i = 0; i < 100; i++) {
    for (const line of berth.log().split('\n')) {
      if (!line.includes(id) || !line.includes('job execution ended')) continue;
      return JSON.parse(line).schedulingOverheadMsPerAttempt;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return undefined;
}

async function direct() {
  const dist = new URL('../../packages/server/dist/', import.meta.url).pathname;
  const { createLinuxDriver } = await import(`${dist}runtime/index.js`);
  const { DaemonClient } = await import(`${dist}sandbox-api/client.js`);
  const { defaultCpuShares } = await import(`${dist}runtime/driver.js`);
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-bench-direct-'));
  const app = join(dataDir, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), PKG);
  const driver = await createLinuxDriver({ dataDir });
  const one = async (id) => {
    const info = await driver.ensure(id, {
      memoryMb: MEMORY_MB,
      pidsMax: 1024,
      cpuShares: defaultCpuShares(MEMORY_MB),
      diskMb: MEMORY_MB,
      envs: { TASK_INDEX: '0' },
      image: 'blaxel/base-image:latest',
      volumes: [{ hostPath: app, mountPath: '/app', readOnly: true }],
    });
    const daemon = DaemonClient.at(info.socketPath);
    await daemon.waitHealthy();
    const p = await daemon.start({
      command: 'true',
      name: 'task',
      workingDir: '/app',
      waitForCompletion: true,
    });
    if (p.exitCode !== 0) throw new Error(`direct task exited ${p.exitCode}`);
    await driver.remove(id);
  };
  try {
    await one('bench-direct-warm');
    const t0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: PARALLEL }, async () => {
        while (next < N) await one(`bench-direct-${next++}`);
      }),
    );
    return performance.now() - t0;
  } finally {
    await driver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function benchJobs() {
  const { ms: berthMs, overheadMs } = await viaBerth();
  const directMs = await direct();
  header(`jobs: ${N} tasks running \`true\`, ${PARALLEL} at a time, each in a fresh sandbox`);
  const rate = (ms) => (N * 1000) / ms;
  row(
    'tasks/s through Berth (baseline: driver directly)',
    rate(berthMs),
    rate(directMs),
    'tasks/s',
    '>= 0.5',
  );
  row('wall time per task slot (ms)', (berthMs * PARALLEL) / N, (directMs * PARALLEL) / N, 'ms');
  const overhead = ((berthMs - directMs) * PARALLEL) / N;
  console.log(
    `scheduling overhead per task, measured by the server: ${overheadMs?.toFixed(1) ?? '?'} ms (target <= 20 ms)`,
  );
  console.log(`wall-time difference per task slot vs direct: ${overhead.toFixed(1)} ms`);
  return { berthMs, directMs, overhead, overheadMs };
}
