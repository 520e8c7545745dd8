// A pre-started (warm-pool) daemon answers one request of its own before anyone else calls it. V8 compiles lazily,
// and a fresh daemon's first request compiles Node's whole HTTP server path: done here, that is paid while the
// sandbox waits in the pool, not on the user's create → first exec (~2-3 ms of it). The same request costs no
// memory that an idle sandbox would not spend anyway: the gateway asks every sandbox for /health before standby.
// Running a process as well took the first exec another ~5 ms lower but left each idle sandbox ~0.4 MB larger,
// which the density target could not afford (docs/decisions/010-sandbox-performance.md).
import { request } from 'node:http';

type Target = { socketPath: string } | { port: number };

/** Calls GET /health once; never throws (a failed warm-up only leaves the daemon as cold as it started). */
export function warmUp(target: Target): Promise<void> {
  return new Promise((resolve) => {
    const req = request(
      { ...target, ...('port' in target ? { host: '127.0.0.1' } : {}), path: '/health' },
      (res) => {
        res.resume();
        res.on('end', resolve);
        res.on('error', () => resolve());
      },
    );
    req.on('error', () => resolve());
    req.end();
  });
}
