// Entry point of the daemon that runs inside each sandbox (`node /opt/berth/sandbox-api/daemon.cjs`, bundled from
// this file by scripts/bundle-daemon.mjs). Listens on BERTH_SANDBOX_SOCKET (the host gateway's way in) or on
// 127.0.0.1:BERTH_SANDBOX_PORT, then prints one JSON line `{"event":"listening",...}` on stdout so whoever
// started it knows it is ready.
import { chmodSync, closeSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { adoptApi, createApi, createHttpServer, serveOn } from './app.js';
import { loadDaemonConfig } from './config.js';
import type { SandboxApi } from './context.js';
import { TAKEOVER_KEY, type Takeover } from './upgrade.js';
import { warmUpProcessPath } from './process/warm-up.js';

/** How often a daemon started with BERTH_SANDBOX_EXIT_WITH_PARENT checks that its parent is still there. */
const PARENT_CHECK_MS = 1000;
/** O_CLOEXEC as /proc/<pid>/fdinfo reports it (octal `flags:`). */
const O_CLOEXEC = 0o2000000;

/**
 * Closes descriptors inherited from whoever started us (beyond stdio), so no process the daemon starts inherits
 * one: every descriptor Node opens itself is close-on-exec, so one without that flag came from outside (a host
 * file or pipe leaked down the launch chain). NODE_CHANNEL_FD, Node's own IPC channel, is kept.
 */
function closeInheritedFds(): void {
  const keep = new Set([0, 1, 2, Number(process.env.NODE_CHANNEL_FD ?? -1)]);
  let fds: string[];
  try {
    fds = readdirSync('/proc/self/fd');
  } catch {
    return; // no /proc (not Linux): nothing to inspect
  }
  for (const name of fds) {
    const fd = Number(name);
    if (keep.has(fd)) continue;
    try {
      const flags = /^flags:\s+([0-7]+)/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'));
      if (flags && (Number.parseInt(flags[1], 8) & O_CLOEXEC) === 0) closeSync(fd);
    } catch {
      // gone meanwhile (the directory listing's own descriptor)
    }
  }
}

/** This code was loaded by a running daemon's POST /upgrade: take over its server and processes, start nothing. */
function takeOver(t: Takeover): void {
  try {
    const api = adoptApi(loadDaemonConfig(), t.api);
    serveOn(t.server, api);
    // The signal handlers of the earlier code would stop with its (now empty) view of the processes.
    process.removeAllListeners('SIGTERM');
    process.removeAllListeners('SIGINT');
    onStop(t.server, api);
    t.done();
  } catch (err) {
    t.done(err as Error);
  }
}

/** SIGTERM/SIGINT: every process killed, uploads dropped, the server closed. */
function onStop(server: Server, api: SandboxApi): void {
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    api.processes.killAll();
    api.uploads.disposeSync();
    server.close();
    server.closeAllConnections();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

function main(): void {
  const takeover = (globalThis as Record<string, unknown>)[TAKEOVER_KEY] as Takeover | undefined;
  if (takeover) {
    takeOver(takeover);
    return;
  }
  closeInheritedFds();
  // A log reader that went away must not end the daemon with EPIPE.
  process.stdout.on('error', () => undefined);
  process.stderr.on('error', () => undefined);
  const config = loadDaemonConfig();
  const api = createApi(config);
  const server = createHttpServer(api);

  const ready = () => {
    if (config.socket) {
      // The host side connects through a bind mount, possibly as another uid.
      chmodSync(config.socket, 0o666);
      process.stdout.write(`${JSON.stringify({ event: 'listening', socket: config.socket })}\n`);
    } else {
      const { port } = server.address() as AddressInfo;
      process.stdout.write(
        `${JSON.stringify({ event: 'listening', url: `http://127.0.0.1:${port}`, port })}\n`,
      );
    }
  };
  const listen = () => {
    // Only from here: a warm-up that cannot listen on its loopback port (warm-up.ts) is no reason to end.
    server.on('error', (err) => {
      process.stderr.write(`sandbox-api: ${err.message}\n`);
      process.exit(1);
    });
    if (config.socket) {
      rmSync(config.socket, { force: true }); // a socket file left by a previous run
      server.listen(config.socket, ready);
    } else {
      server.listen(config.port, '127.0.0.1', ready);
    }
  };
  if (config.warmUp) void warmUpProcessPath(server, api).then(listen);
  else listen();

  onStop(server, api);
  if (config.exitWithParent) {
    // Outside a sandbox (tests, a developer's machine) a daemon whose starter died must not linger.
    const parent = process.ppid;
    setInterval(() => {
      if (process.ppid !== parent) process.kill(process.pid, 'SIGTERM');
    }, PARENT_CHECK_MS).unref();
  }
}

main();
