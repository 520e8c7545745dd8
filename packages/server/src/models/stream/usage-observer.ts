// A pass-through that watches a provider's answer for its token usage on the side. Every chunk is
// forwarded the moment it arrives; SSE events are JSON-parsed only when they mention usage, and a JSON
// body is searched once it has ended.
import { Transform, type TransformCallback } from 'node:stream';
import { mergeUsage, type TokenUsage, usageIn, usageInJsonText } from '../usage.js';
import { SseParser } from './sse.js';

/** A JSON answer larger than this is not kept for usage (it is still forwarded whole). */
const MAX_JSON_KEPT = 16 * 1024 * 1024;

export class UsageObserver extends Transform {
  usage: Partial<TokenUsage> = {};
  /** Bytes forwarded so far, for an estimate when the provider reports nothing. */
  bytes = 0;
  /** Time of the first chunk (ms since epoch), for time-to-first-token. */
  firstChunkAt?: number;
  private readonly sse?: SseParser;
  private readonly kept: Buffer[] = [];
  private keptBytes = 0;

  constructor(
    contentType: string,
    private readonly now: () => number = Date.now,
  ) {
    super();
    if (contentType.includes('text/event-stream')) this.sse = new SseParser();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback) {
    this.firstChunkAt ??= this.now();
    this.bytes += chunk.length;
    cb(null, chunk);
    if (this.sse) {
      for (const e of this.sse.push(chunk)) this.observe(e.data);
    } else if (this.keptBytes + chunk.length <= MAX_JSON_KEPT) {
      this.kept.push(chunk);
      this.keptBytes += chunk.length;
    }
  }

  override _flush(cb: TransformCallback) {
    if (this.sse) for (const e of this.sse.end()) this.observe(e.data);
    else if (this.kept.length)
      this.usage = mergeUsage(this.usage, usageInJsonText(Buffer.concat(this.kept).toString('utf8')));
    cb();
  }

  private observe(data: string) {
    if (!data.includes('"usage') && !data.includes('usageMetadata')) return;
    try {
      this.usage = mergeUsage(this.usage, usageIn(JSON.parse(data)));
    } catch {
      // Not JSON (e.g. `[DONE]`): nothing to count.
    }
  }
}
