// A pass-through that watches a provider's answer for its token usage on the side. Every chunk is
// forwarded the moment it arrives; SSE events are JSON-parsed only when they mention usage, and a JSON
// body is searched once it has ended. The text a stream carries is kept (bounded) so a stream cut before
// its usage arrived is charged what it produced. When Berth itself asked an OpenAI-style provider for
// stream usage, the usage-only chunk (`choices: []`) is taken out: a client that did not ask for it
// would read `choices[0]` of it and fail.
import { Transform, type TransformCallback } from 'node:stream';
import { mergeUsage, type TokenUsage, usageIn, usageInJsonText } from '../usage.js';
import { SseParser } from './sse.js';

/** A JSON answer larger than this is not kept for usage (it is still forwarded whole). */
const MAX_JSON_KEPT = 16 * 1024 * 1024;
/** Streamed text kept for counting a cut stream (~250k tokens); past it, the rest counts 4 chars a token. */
const MAX_TEXT_KEPT = 1024 * 1024;
const CHARS_PER_TOKEN = 4;

/** String values of the fields that carry generated text in OpenAI, Anthropic and Responses stream events. */
const TEXT_FIELD =
  /"(?:content|text|partial_json|arguments|thinking|reasoning_content|reasoning|delta|refusal)":"((?:[^"\\]|\\.)*)"/g;

/** Byte patterns of an empty choices list, made once (Buffer.includes with a string converts it per call). */
const EMPTY_CHOICES = Buffer.from('"choices":[]');
const EMPTY_CHOICES_SPACED = Buffer.from('"choices": []');

/** Usage present as an object (OpenAI repeats `"usage":null` in every chunk once usage is asked for). */
const USAGE_OBJECT = /"usage"\s*:\s*\{|usageMetadata/;

/** An OpenAI usage-only chunk: `"choices":[]` plus a usage object. */
const USAGE_ONLY = /"choices"\s*:\s*\[\s*\]/;

export class UsageObserver extends Transform {
  usage: Partial<TokenUsage> = {};
  /** Bytes forwarded so far, for an estimate when the provider reports nothing. */
  bytes = 0;
  /** Time of the first chunk (ms since epoch), for time-to-first-token. */
  firstChunkAt?: number;
  private readonly sse?: SseParser;
  private readonly kept: Buffer[] = [];
  private keptBytes = 0;
  private text: string[] = [];
  private textChars = 0;
  private overflowChars = 0;
  /** Strip mode: bytes of an event not yet complete. */
  private pending = '';
  /** Strip mode: chunks go through the decoder from now on (set by the first one that could not pass whole). */
  private decoding = false;
  private decoder?: TextDecoder;

  constructor(
    contentType: string,
    private readonly now: () => number = Date.now,
    /** Berth added `stream_options.include_usage`: drop the usage-only chunk the caller never asked for. */
    private readonly stripUsageChunk = false,
  ) {
    super();
    if (contentType.includes('text/event-stream')) this.sse = new SseParser();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback) {
    this.firstChunkAt ??= this.now();
    this.bytes += chunk.length;
    if (this.sse && this.stripUsageChunk && !this.wholeEventsWithoutUsage(chunk))
      cb(null, this.withoutUsageChunk(chunk) || undefined);
    else cb(null, chunk);
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
    const rest = this.pending + (this.decoder?.decode() ?? '');
    this.pending = '';
    cb(null, rest || undefined);
  }

  /**
   * The text streamed so far, to be counted with the tokenizer, and the tokens of what streamed past the text
   * kept (undefined for an answer that is no stream).
   */
  streamed(): { text: string; beyondText: number } | undefined {
    if (!this.sse) return undefined;
    let text: string;
    try {
      text = JSON.parse(`"${this.text.join('')}"`);
    } catch {
      text = this.text.join('');
    }
    return { text, beyondText: Math.ceil(this.overflowChars / CHARS_PER_TOKEN) };
  }

  /**
   * Whether the chunk can pass as it is in strip mode: no chunk went through the decoder yet (which may hold
   * part of an event or of a character), it ends on an event boundary and holds no usage-only chunk (the common
   * case: providers send one whole event per chunk).
   */
  private wholeEventsWithoutUsage(chunk: Buffer): boolean {
    return (
      !this.decoding &&
      chunk.length >= 2 &&
      chunk[chunk.length - 1] === 0x0a &&
      chunk[chunk.length - 2] === 0x0a &&
      chunk.indexOf(EMPTY_CHOICES) < 0 &&
      chunk.indexOf(EMPTY_CHOICES_SPACED) < 0
    );
  }

  /** Complete events of this chunk, minus a usage-only one; an incomplete tail waits for the next chunk. */
  private withoutUsageChunk(chunk: Buffer): string {
    this.decoding = true;
    this.decoder ??= new TextDecoder();
    this.pending += this.decoder.decode(chunk, { stream: true });
    let out = '';
    for (;;) {
      const m = /\r?\n\r?\n/.exec(this.pending);
      if (!m) break;
      const end = m.index + m[0].length;
      const event = this.pending.slice(0, end);
      this.pending = this.pending.slice(end);
      if (!(event.includes('"usage"') && USAGE_ONLY.test(event))) out += event;
    }
    return out;
  }

  private observe(data: string) {
    this.collectText(data);
    if (!USAGE_OBJECT.test(data)) return;
    try {
      this.usage = mergeUsage(this.usage, usageIn(JSON.parse(data)));
    } catch {
      // Not JSON (e.g. `[DONE]`): nothing to count.
    }
  }

  private collectText(data: string) {
    // Responses events repeat the whole text in their `.done` / `.added` / `completed` events: only deltas count.
    if (data.includes('"type":"response.') && !data.includes('.delta"')) return;
    TEXT_FIELD.lastIndex = 0;
    for (let m = TEXT_FIELD.exec(data); m; m = TEXT_FIELD.exec(data)) {
      const escaped = m[1];
      if (!escaped) continue;
      // Kept still JSON-escaped: concatenated, they unescape in one JSON.parse when (rarely) needed.
      if (this.textChars + escaped.length <= MAX_TEXT_KEPT) {
        this.text.push(escaped);
        this.textChars += escaped.length;
      } else this.overflowChars += escaped.length;
    }
  }
}
