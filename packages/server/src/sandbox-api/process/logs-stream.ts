// GET /process/{id}/logs/stream: the kept output, then live output, as text with each line prefixed `stdout:` or
// `stderr:`; a partial line is sent at once and its continuation is not prefixed again. Ends when the process does.
import { StringDecoder } from 'node:string_decoder';
import type { SandboxApi } from '../context.js';
import { streamHeaders } from '../http.js';
import type { Handler } from '../router.js';
import { KEEPALIVE_LINE } from '../schema.js';
import { processOr404 } from './find.js';
import type { OutStream } from './log-buffer.js';
import { STREAM_KEEPALIVE_MS } from './start.js';

export function streamLogs(api: SandboxApi): Handler {
  return ({ res, params }) => {
    const p = processOr404(api, params.id);
    res.writeHead(200, streamHeaders('text/plain; charset=utf-8'));
    const framer = new LineFramer();
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearInterval(keepalive);
      res.end(framer.end());
    };
    // A keepalive only between lines: inside one it would become part of the line.
    const keepalive = setInterval(() => {
      if (framer.atLineStart) res.write(KEEPALIVE_LINE);
    }, STREAM_KEEPALIVE_MS);
    const unfollow = p.logs.follow((stream, data) => res.write(framer.push(stream, data)), finish);
    res.once('close', () => {
      done = true;
      clearInterval(keepalive);
      unfollow();
    });
  };
}

export class LineFramer {
  atLineStart = true;
  private last: OutStream | undefined;
  private decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };

  push(stream: OutStream, data: Buffer): string {
    const text = this.decoders[stream].write(data);
    if (!text) return '';
    let out = '';
    // The other stream interrupts a partial line: end it, so the next prefix starts a line.
    if (!this.atLineStart && this.last !== stream) {
      out += '\n';
      this.atLineStart = true;
    }
    this.last = stream;
    let i = 0;
    while (i < text.length) {
      if (this.atLineStart) {
        out += `${stream}:`;
        this.atLineStart = false;
      }
      const nl = text.indexOf('\n', i);
      if (nl < 0) {
        out += text.slice(i);
        break;
      }
      out += text.slice(i, nl + 1);
      this.atLineStart = true;
      i = nl + 1;
    }
    return out;
  }

  /** What is left to write when the output ends: the decoders' tails and a final newline. */
  end(): string {
    let out = '';
    for (const stream of ['stdout', 'stderr'] as const) {
      const rest = this.decoders[stream].end();
      if (rest) out += this.push(stream, Buffer.from(rest));
    }
    if (!this.atLineStart) out += '\n';
    this.atLineStart = true;
    return out;
  }
}
