// A pre-started (warm-pool) daemon calls its own hot routes a few times before anyone else does. V8 compiles
// lazily: a fresh daemon's first /health took ~9 ms and its first exec ~20 ms more than the next ones, and that
// cost sat on the user's create → first exec path. Done here, it is paid while the sandbox waits in the pool.
import { request } from 'node:http';
import type { SandboxApi } from './context.js';

const ROUNDS = 5;

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
