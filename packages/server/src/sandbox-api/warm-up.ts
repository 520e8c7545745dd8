// A pre-started (warm-pool) daemon calls its own hot routes once before anyone else does. V8 compiles
// lazily: a fresh daemon's first exec took ~5 ms more than the next ones, and that cost sat on the user's
// create → first exec path. Done here, it is paid while the sandbox waits in the pool.
import { request } from 'node:http';
import type { SandboxApi } from './context.js';

/**
 * One round: it takes the first exec from ~11 to ~6 ms; five took it no further but cost each idle daemon 2.1 MB
 * instead of 1.2 MB of compiled code and heap (density is a target too).
 */
const ROUNDS = 1;

type Target = { socketPath: string } | { port: number };

function call(target: Target, method: string, path: string, body?: unknown): Promise<string> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      {
        ...target,
        ...('port' in target ? { host: '127.0.0.1' } : {}),
        method,
        path,
        headers: data ? { 'content-type': 'application/json' } : {},
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => {
          text += c;
        });
        res.on('end', () => resolve(text));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

/** Runs the warm-up; the processes it started leave no record behind. Never throws. */
export async function warmUp(api: SandboxApi, target: Target): Promise<void> {
  try {
    for (let i = 0; i < ROUNDS; i++) {
      await call(target, 'GET', '/health');
      const started = JSON.parse(
        await call(target, 'POST', '/process', { command: 'true', waitForCompletion: true }),
      );
      if (typeof started.pid === 'string') {
        await call(target, 'GET', `/process/${started.pid}`);
        api.processes.forget(started.pid);
      }
    }
  } catch {
    // A warm-up that fails only leaves the daemon as cold as it started.
  }
}
