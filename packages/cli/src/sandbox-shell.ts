// `berth sandbox shell <name>`: an interactive shell in the sandbox, on a PTY over the WebSocket of
// GET /terminal/ws. Keystrokes go up as binary frames, the terminal's size follows the local window. The same session
// runs one command on a PTY for `berth sandbox exec -t` (`?command=`), and ends with its exit code.
import type { TerminalClientMessage, TerminalExitMessage } from '@berth/server/sandbox-api/schema.js';
import type { Command } from 'commander';
import type WebSocket from 'ws';
import type { CliConfig } from './config.js';
import { loadCliConfig } from './config.js';
import { openSandbox } from './sandbox-client.js';

/** Exit code when the connection ends without the shell reporting its own. */
const LOST = 255;

export interface TerminalOptions {
  workdir?: string;
  /** A command line to run instead of the shell. */
  command?: string;
  /** Keystrokes go up (a shell, `exec -it`); without, the program reads no input (`exec -t`). */
  input: boolean;
}

/** A PTY in sandbox `name` until its program ends; resolves with its exit code. */
export async function terminal(cfg: CliConfig, name: string, o: TerminalOptions): Promise<number> {
  const sb = await openSandbox(cfg, name);
  const q = new URLSearchParams();
  if (process.stdout.columns) q.set('cols', String(process.stdout.columns));
  if (process.stdout.rows) q.set('rows', String(process.stdout.rows));
  if (o.workdir) q.set('workingDir', o.workdir);
  if (o.command) q.set('command', o.command);
  const url = `${sb.url.replace(/^http/, 'ws')}/terminal/ws?${q}`;
  // Loaded here: only the terminal commands need a WebSocket client.
  const { default: WS } = await import('ws');
  return session(new WS(url, { headers: sb.headers, perMessageDeflate: false }), o.input);
}

export function registerSandboxShell(sandbox: Command) {
  sandbox
    .command('shell')
    .description('open an interactive shell in a sandbox')
    .argument('<name>', 'sandbox name')
    .option('-w, --workdir <dir>', 'directory to start in')
    .action(async (name: string, o: { workdir?: string }) => {
      process.exitCode = await terminal(loadCliConfig(), name, { workdir: o.workdir, input: true });
    });
}

function session(ws: WebSocket, input: boolean): Promise<number> {
  const stdin = process.stdin;
  return new Promise((resolve, reject) => {
    let exitCode = LOST;
    const restore = () => {
      if (input && stdin.isTTY) stdin.setRawMode(false);
      if (input) stdin.pause();
      process.stdout.off('resize', resize);
    };
    const resize = () => {
      if (ws.readyState === ws.OPEN)
        ws.send(
          JSON.stringify({
            type: 'resize',
            cols: process.stdout.columns,
            rows: process.stdout.rows,
          } satisfies TerminalClientMessage),
        );
    };
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => {
        body += c;
      });
      res.on('end', () => {
        let detail = body;
        try {
          detail = JSON.parse(body).detail ?? body;
        } catch {}
        reject(new Error(`terminal failed (HTTP ${res.statusCode}): ${detail}`));
      });
    });
    ws.on('open', () => {
      process.stdout.on('resize', resize);
      if (!input) return;
      if (stdin.isTTY) stdin.setRawMode(true);
      stdin.on('data', (d: Buffer) => ws.send(d, { binary: true }));
      stdin.resume();
    });
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary) {
        process.stdout.write(data);
        return;
      }
      const text = data.toString('utf8');
      try {
        const msg = JSON.parse(text) as Partial<TerminalExitMessage> | null;
        if (msg?.type === 'exit') {
          exitCode = Number(msg.exitCode ?? 0);
          return;
        }
      } catch {}
      process.stdout.write(text);
    });
    ws.on('close', () => {
      restore();
      resolve(exitCode);
    });
    ws.on('error', (err) => {
      restore();
      reject(err);
    });
  });
}
