// A daemon started ahead of time (a warm pool's sandbox) serves its own POST /process before it listens where the
// host reaches it: the first process a daemon started took 5-8 ms more than the next ones (V8 compiling the request
// path, Node's first spawns), and in a sandbox from the pool that first process is the user's first exec, right
// after the create. The requests go over a loopback port of the sandbox's own network namespace, closed again before
// the daemon's socket exists; the processes they started are forgotten, so GET /process never lists them.
import { request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { SandboxApi } from '../context.js';

/** Two rounds: the second exec still ran ~1.5 ms slower than the third (measured on the pool's sandboxes). */
const ROUNDS = 2;

/** Best effort: a warm-up that fails leaves the daemon as it was, only not warmed. Resolves with the server closed. */
export async function warmUpProcessPath(server: Server, api: SandboxApi): Promise<void> {
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    const { port } = server.address() as AddressInfo;
    for (let i = 0; i < ROUNDS; i++) {
      const answer = JSON.parse(await post(port, '/process', { command: 'true', waitForCompletion: true }));
      if (typeof answer?.pid === 'string') api.processes.forget(answer.pid);
    }
  } catch {
    // not warmed
  } finally {
    await new Promise<void>((resolve) => {
      if (!server.listening) return resolve();
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }
}

function post(port: number, path: string, body: unknown): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        headers: { 'content-type': 'application/json', connection: 'close' },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve(text));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}
