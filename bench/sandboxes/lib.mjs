// Helpers of the sandbox benchmarks: a Berth child process, its sandboxes, percentiles.
import { Pool } from 'undici';
import { startBerth } from '../lib/berth.mjs';

export const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : Number.NaN;
};

/**
 * Latency benchmarks use 2 GB sandboxes: their CPU weight (one core's worth per 2 GB) then equals a host
 * process's, so what is measured is Berth, not the sandbox yielding to the benchmark's own processes.
 */
export const BENCH_MEMORY_MB = 2048;
/** The density benchmark uses small ones: memory is what it measures. */
export const DENSE_MEMORY_MB = 256;

/** `berth serve` as a child, plus an HTTP/1.1 keep-alive pool to it (what a real client holds). */
export async function startSandboxBerth(env = {}) {
  const berth = await startBerth(env);
  const pool = new Pool(berth.url, { connections: 16 });
  const auth = { authorization: `Bearer ${berth.key}` };
  const json = { ...auth, 'content-type': 'application/json' };
  const call = async (method, path, body, headers = {}) => {
    const res = await pool.request({
      method,
      path,
      headers: body ? { ...json, ...headers } : { ...auth, ...headers },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.body.text();
    if (res.statusCode >= 400) throw new Error(`${method} ${path}: ${res.statusCode} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
  return {
    ...berth,
    pool,
    call,
    sandboxPath: (name) => `/run/default/sandboxes/${name}`,
    create: (name, spec = {}) =>
      call('POST', '/v0/sandboxes', {
        metadata: { name },
        spec: { ...spec, runtime: { memory: BENCH_MEMORY_MB, ...(spec.runtime ?? {}) } },
      }),
    async removeAll() {
      const list = await call('GET', '/v0/sandboxes?limit=1000');
      await Promise.all(list.map((s) => call('DELETE', `/v0/sandboxes/${s.metadata.name}`)));
      for (let i = 0; i < 600; i++) {
        const left = (await call('GET', '/v0/sandboxes?limit=1000')).filter((s) => s.status !== 'TERMINATED');
        if (!left.length) return;
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async stop() {
      // Sandboxes outlive their server: remove what a failed run left before the data dir goes.
      await this.removeAll().catch(() => undefined);
      await pool.close();
      await berth.stop();
    },
  };
}

/** Milliseconds of `fn`, once. */
export async function timed(fn) {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}
