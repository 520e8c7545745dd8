// `berth sandbox logs <sandbox> <process> [--follow]`: a process's output, through the sandbox API's process
// logs routes; stdout to stdout and stderr to stderr. With --follow it streams until the process ends.
import type { Command } from 'commander';
import { loadCliConfig } from './config.js';
import { encodePath, failure, openSandbox } from './sandbox-client.js';

/** What the stream sends between lines so idle connections stay open; not output. */
const KEEPALIVE = '[keepalive]';

/**
 * Splits the text stream of GET /process/{id}/logs/stream (lines prefixed `stdout:` or `stderr:`; a partial
 * line's continuation comes unprefixed) back into the two streams.
 */
export class LogDemuxer {
  private buffer = '';
  private stream: 'stdout' | 'stderr' = 'stdout';
  private atLineStart = true;

  constructor(private readonly write: (stream: 'stdout' | 'stderr', text: string) => void) {}

  push(text: string) {
    this.buffer += text;
    while (this.buffer) {
      if (this.atLineStart) {
        // A prefix or keepalive may arrive split across chunks: wait for enough text to tell.
        const nl = this.buffer.indexOf('\n');
        const head = nl < 0 ? this.buffer : this.buffer.slice(0, nl);
        if (head === KEEPALIVE && nl >= 0) {
          this.buffer = this.buffer.slice(nl + 1);
          continue;
        }
        const m = /^(stdout|stderr):/.exec(this.buffer);
        if (m) {
          this.stream = m[1] as 'stdout' | 'stderr';
          this.buffer = this.buffer.slice(m[0].length);
        } else if (nl < 0 && ['stdout:', 'stderr:', KEEPALIVE].some((p) => p.startsWith(head))) return;
        this.atLineStart = false;
      }
      const nl = this.buffer.indexOf('\n');
      const piece = nl < 0 ? this.buffer : this.buffer.slice(0, nl + 1);
      this.buffer = this.buffer.slice(piece.length);
      if (piece) this.write(this.stream, piece);
      if (nl >= 0) this.atLineStart = true;
    }
  }

  /** The stream ended: whatever text is held back waiting for more is output after all. */
  end() {
    if (this.buffer && this.buffer !== KEEPALIVE) this.write(this.stream, this.buffer);
    this.buffer = '';
  }
}

export function registerSandboxLogs(sandbox: Command) {
  sandbox
    .command('logs')
    .description('print the output of a process in a sandbox (by name or pid)')
    .argument('<sandbox>', 'sandbox name')
    .argument('<process>', 'process name or pid')
    .option('-f, --follow', 'keep printing new output until the process ends')
    .action(async (name: string, proc: string, o: { follow?: boolean }) => {
      const sb = await openSandbox(loadCliConfig(), name);
      const base = `${sb.url}/process/${encodePath(proc)}/logs`;
      if (!o.follow) {
        const res = await fetch(base, { headers: sb.headers });
        if (!res.ok) throw await failure(res, `logs of ${proc}`);
        const logs = (await res.json()) as { stdout?: string; stderr?: string };
        process.stdout.write(logs.stdout ?? '');
        process.stderr.write(logs.stderr ?? '');
        return;
      }
      const res = await fetch(`${base}/stream`, { headers: sb.headers });
      if (!res.ok || !res.body) throw await failure(res, `logs of ${proc}`);
      const demux = new LogDemuxer((stream, text) => process[stream].write(text));
      const decoder = new TextDecoder();
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>)
        demux.push(decoder.decode(chunk, { stream: true }));
      demux.push(decoder.decode());
      demux.end();
    });
}
