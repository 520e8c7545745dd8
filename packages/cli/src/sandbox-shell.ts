// `berth sandbox shell <name>`: an interactive shell in the sandbox, on a PTY over the WebSocket of
// GET /terminal/ws. Keystrokes go up as binary frames, the terminal's size follows the local window.
import type { TerminalClientMessage, TerminalExitMessage } from '@berth/server/sandbox-api/schema.js';
import type { Command } from 'commander';
import WebSocket from 'ws';
import { loadCliConfig } from './config.js';
import { openSandbox } from './sandbox-client.js';

/** Exit code when the connection ends without the shell reporting its own. */
const LOST = 255;

export function registerSandboxShell(sandbox: Command) {
  sandbox
    .command('shell')
    .description('open an interactive shell in a sandbox')
    .argument('<name>', 'sandbox name')
    .option('-w, --workdir <dir>', 'directory to start in')
    .action(async (name: string, o: { workdir?: string }) => {
      const sb = await openSandbox(loadCliConfig(), name);
      const q = new URLSearchParams();
      if (process.stdout.columns) q.set('cols', String(process.stdout.columns));
      if (process.stdout.rows) q.set('rows', String(process.stdout.rows));
      if (o.workdir) q.set('workingDir', o.workdir);
      const url = `${sb.url.replace(/^http/, 'ws')}/terminal/ws?${q}`;
      process.exitCode = await session(new WebSocket(url, { headers: sb.headers, perMessageDeflate: false }));
    });
}

function session(ws: WebSocket): Promise<number> {
  const stdin = process.stdin;
  return new Promise((resolve, reject) => {
    let exitCode = LOST;
    const restore = () => {
      if (stdin.isTTY) stdin.setRawMode(false);
      stdin.pause();
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
        reject(new Error(`shell failed (HTTP ${res.statusCode}): ${detail}`));
      });
    });
    ws.on('open', () => {
      if (stdin.isTTY) stdin.setRawMode(true);
      stdin.on('data', (d: Buffer) => ws.send(d, { binary: true }));
      stdin.resume();
      process.stdout.on('resize', resize);
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
