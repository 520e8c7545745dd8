// GET /terminal/ws: an interactive shell on a PTY over a WebSocket. Client → server: binary frames are keystrokes;
// text frames are JSON `{"type":"input","data":"..."}` or `{"type":"resize","cols":N,"rows":M}` (any other text is
// taken as keystrokes). Server → client: binary frames of terminal output, then `{"type":"exit","exitCode":N}` and
// a close. `?cols=&rows=&workingDir=` set the start; `?command=` runs that command line (through the shell's `-c`)
// instead of an interactive shell, and its exit code is the one sent. `ws` and `node-pty` load on first use: idle
// daemons stay small.
import { spawn } from 'node:child_process';
import { closeSync, constants, existsSync, openSync, readSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import type { WebSocket, WebSocketServer } from 'ws';
import type { SandboxApi } from './context.js';
import { PathResolver } from './paths.js';
import { asUserProcess } from './process/oom-score.js';
import { sandboxEnv } from './process/spec.js';
import type { UpgradeHandler } from './router.js';
import type { TerminalExitMessage } from './schema.js';

export const DEFAULT_COLS = 80;
export const DEFAULT_ROWS = 24;
const MAX_DIMENSION = 1000;

interface Term {
  write(data: string): void;
  resize(cols: number, rows: number): void;
  close(): void;
  onData(fn: (data: string) => void): void;
  onExit(fn: (code: number) => void): void;
}

let server: WebSocketServer | undefined;

export function terminal(api: SandboxApi): UpgradeHandler {
  return async ({ req, socket, head, query }) => {
    const cwd = query.get('workingDir')
      ? await api.paths.resolve(PathResolver.decode(query.get('workingDir')!))
      : api.config.workdir;
    const cols = dimension(query.get('cols'), DEFAULT_COLS);
    const rows = dimension(query.get('rows'), DEFAULT_ROWS);
    const command = query.get('command') || undefined;
    if (!server) {
      const { WebSocketServer } = await import('ws');
      server = new WebSocketServer({ noServer: true, perMessageDeflate: false });
    }
    // Loaded before the handshake completes: keystrokes sent right after `open` must find the terminal there.
    const pty = await loadPty();
    server.handleUpgrade(req, socket, head, (ws) => {
      try {
        attach(ws, openTerm(pty, cwd, cols, rows, command));
      } catch (err) {
        ws.close(1011, String((err as Error)?.message ?? err).slice(0, 120));
      }
    });
  };
}

function attach(ws: WebSocket, term: Term): void {
  term.onData((data) => {
    if (ws.readyState === ws.OPEN) ws.send(Buffer.from(data, 'utf8'), { binary: true });
  });
  term.onExit((exitCode) => {
    if (ws.readyState !== ws.OPEN) return;
    ws.send(JSON.stringify({ type: 'exit', exitCode } satisfies TerminalExitMessage));
    ws.close(1000, 'exit');
  });
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    const text = data.toString('utf8');
    if (isBinary) return term.write(text);
    const msg = control(text);
    if (!msg) term.write(text);
    else if (msg.type === 'input' && typeof msg.data === 'string') term.write(msg.data);
    else if (msg.type === 'resize')
      term.resize(dimension(String(msg.cols), DEFAULT_COLS), dimension(String(msg.rows), DEFAULT_ROWS));
  });
  ws.on('close', () => term.close());
  ws.on('error', () => term.close());
}

function control(text: string): { type?: string; data?: unknown; cols?: unknown; rows?: unknown } | null {
  if (!text.startsWith('{')) return null;
  try {
    const msg = JSON.parse(text);
    return msg && (msg.type === 'input' || msg.type === 'resize') ? msg : null;
  } catch {
    return null;
  }
}

function dimension(raw: string | null, fallback: number): number {
  const n = Number(raw);
  return Number.isInteger(n) && n > 0 && n <= MAX_DIMENSION ? n : fallback;
}

/** Single-quoted for a shell. */
const shq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

function shell(): string {
  const env = process.env.SHELL;
  if (env && existsSync(env)) return env;
  return existsSync('/bin/bash') ? '/bin/bash' : '/bin/sh';
}

function openTerm(
  pty: typeof import('node-pty') | undefined,
  cwd: string,
  cols: number,
  rows: number,
  command?: string,
): Term {
  const env = { ...sandboxEnv(), TERM: 'xterm-256color' };
  if (pty) {
    const p = pty.spawn(shell(), command ? ['-c', command] : [], {
      name: 'xterm-256color',
      cols,
      rows,
      cwd,
      env: env as Record<string, string>,
    });
    asUserProcess(p.pid);
    const release = keepOutput(p);
    return {
      write: (d) => p.write(d),
      resize: (c, r) => p.resize(c, r),
      close: () => {
        killGroup(p.pid, () => p.kill());
        release();
      },
      onData: (fn) => p.onData(fn),
      onExit: (fn) => p.onExit((e) => fn(e.exitCode)),
    };
  }
  // script(1) allocates the PTY itself; we talk to it over pipes. No resize in this mode.
  const line = command ? `${shell()} -c ${shq(command)}` : shell();
  const child = spawn('script', ['-q', '-e', '-c', line, '/dev/null'], { cwd, env, detached: true });
  asUserProcess(child.pid);
  return {
    write: (d) => child.stdin.write(d),
    resize: () => {},
    close: () => killGroup(child.pid, () => child.kill('SIGKILL')),
    onData: (fn) => {
      child.stdout.on('data', (d: Buffer) => fn(d.toString('utf8')));
      child.stderr.on('data', (d: Buffer) => fn(d.toString('utf8')));
    },
    // 'close', not 'exit': the exit can come before the last of its output is read from the pipes.
    onExit: (fn) => child.on('close', (code) => fn(code ?? 1)),
  };
}

/** The most read synchronously at a terminal's end: far more than a PTY holds unread, bounded all the same. */
const DRAIN_MAX_BYTES = 1024 * 1024;

/** What node-pty 1.1 keeps of a terminal, beside its public interface. */
interface PtyInternals {
  /** The PTY's slave side (`/dev/pts/N`) and its master's descriptor. */
  _pty?: string;
  _fd?: number;
  /** The stream reading the master. */
  _socket?: {
    destroy(err?: Error): unknown;
    destroyed?: boolean;
    emit(event: 'data', text: string): boolean;
  };
}

/**
 * Keeps the end of a terminal's output. node-pty ends its stream at the first read that finds the shell gone: on
 * Linux a non-blocking read of the master can report the end while the kernel is still moving the last output over
 * (measured here: 8,190 of 8,893 bytes printed right before an `exit`, every time), and it destroys the stream 200 ms
 * after the exit at the latest. Holding the slave side open keeps the master from seeing the hang-up, so the output
 * stays readable to the last byte; when node-pty then destroys the stream (after the exit), what is left is read
 * synchronously first and passed on as output. Returns what lets the slave go (idempotent).
 */
function keepOutput(p: import('node-pty').IPty): () => void {
  const t = p as unknown as PtyInternals;
  const socket = t._socket;
  if (!t._pty || t._fd === undefined || !socket) return () => {};
  let slave: number | undefined;
  try {
    slave = openSync(t._pty, constants.O_RDWR | constants.O_NOCTTY);
  } catch {
    return () => {};
  }
  const release = () => {
    if (slave === undefined) return;
    closeSync(slave);
    slave = undefined;
  };
  const master = t._fd;
  const destroy = socket.destroy.bind(socket);
  socket.destroy = (err?: Error) => {
    if (!socket.destroyed && slave !== undefined) {
      const decoder = new StringDecoder('utf8');
      const buf = Buffer.alloc(64 * 1024);
      // Bounded: a process the shell left behind may go on writing, and this read holds the daemon's event loop.
      for (let total = 0; total < DRAIN_MAX_BYTES; ) {
        let n = 0;
        try {
          n = readSync(master, buf, 0, buf.length, null);
        } catch {
          break; // EAGAIN: nothing more
        }
        if (n <= 0) break;
        total += n;
        socket.emit('data', decoder.write(buf.subarray(0, n)));
      }
      const rest = decoder.end();
      if (rest) socket.emit('data', rest);
    }
    release();
    return destroy(err);
  };
  return release;
}

let ptyModule: Promise<typeof import('node-pty') | undefined> | undefined;

/** node-pty, or undefined when its native addon does not load here (or BERTH_SANDBOX_TERMINAL=script asks so). */
function loadPty(): Promise<typeof import('node-pty') | undefined> {
  ptyModule ??= (async () => {
    if (process.env.BERTH_SANDBOX_TERMINAL === 'script') return undefined;
    try {
      const mod = await import('node-pty');
      return ((mod as { default?: typeof import('node-pty') }).default ?? mod) as typeof import('node-pty');
    } catch (err) {
      process.stderr.write(
        `sandbox-api: node-pty unavailable (${(err as Error).message}); terminals use script(1)\n`,
      );
      return undefined;
    }
  })();
  return ptyModule;
}

/** The shell leads its own session: hang up everything it started, not just the shell. */
function killGroup(pid: number | undefined, fallback: () => void): void {
  try {
    if (pid) process.kill(-pid, 'SIGHUP');
  } catch {
    // group already gone
  }
  try {
    fallback();
  } catch {
    // already exited
  }
}
