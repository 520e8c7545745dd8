// Asks a sandbox's API daemon whether it serves: GET /health over its unix socket. A sandbox is DEPLOYED only
// once this answers, so the first request a client sends after the create never meets a half-started daemon.
import { request } from 'node:http';
import type { HealthResponse } from '../sandbox-api/schema.js';

/** One probe's bound: the daemon answers /health from memory in well under a millisecond. */
export const HEALTH_PROBE_TIMEOUT_MS = 1_000;
/** How long a freshly started daemon may take to answer (the runtime already waited for its socket). */
export const HEALTH_WAIT_MS = 10_000;
const RETRY_MS = 5;

export function probeHealth(
  socketPath: string,
  timeoutMs = HEALTH_PROBE_TIMEOUT_MS,
): Promise<HealthResponse> {
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath, path: '/health', method: 'GET', timeout: timeoutMs, agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () => {
          if (res.statusCode !== 200)
            return reject(new Error(`/health answered ${res.statusCode}: ${text.slice(0, 200)}`));
          try {
            resolve(JSON.parse(text) as HealthResponse);
          } catch {
            reject(new Error(`/health answered something that is not JSON: ${text.slice(0, 200)}`));
          }
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`/health did not answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}

/** Probes until the daemon answers, the wait runs out (throws the last error), or `signal` aborts. */
export async function waitHealthy(
  socketPath: string,
  signal?: AbortSignal,
  waitMs = HEALTH_WAIT_MS,
): Promise<HealthResponse> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      return await probeHealth(socketPath);
    } catch (err) {
      if (Date.now() > deadline || signal?.aborted) throw err;
      await new Promise((r) => setTimeout(r, RETRY_MS));
    }
  }
}
