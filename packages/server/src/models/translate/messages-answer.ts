// OpenAI chat completions answers as Anthropic Messages answers, for Anthropic clients on an OpenAI-backed
// endpoint: a whole message, or a stream of `chat.completion.chunk` events turned into Anthropic's events as
// each arrives (message_start, a content block per text run or tool call with its deltas, then message_delta
// with the stop reason and usage, and message_stop). The stop reason waits for the usage chunk that follows
// it, so the client's final message carries the provider's counts.
import { Transform, type TransformCallback } from 'node:stream';
import { SseParser, sseFrame } from '../stream/sse.js';
import { mergeUsage, normalizeUsage, type TokenUsage } from '../usage.js';

const STOP: Record<string, string> = {
  stop: 'end_turn',
  length: 'max_tokens',
  tool_calls: 'tool_use',
  function_call: 'tool_use',
  content_filter: 'refusal',
};

const stopReason = (finish: unknown) =>
  typeof finish === 'string' ? (STOP[finish] ?? 'end_turn') : 'end_turn';

function parseInput(args: unknown): unknown {
  if (typeof args !== 'string' || !args.trim()) return {};
  try {
    const v = JSON.parse(args);
    return v && typeof v === 'object' && !Array.isArray(v) ? v : { value: v };
  } catch {
    // Anthropic's clients expect an object; keep what the model produced rather than fail the call.
    return { arguments: args };
  }
}

const messageId = (id: unknown) =>
  typeof id === 'string' && id ? `msg_${id.replace(/^chatcmpl-/, '')}` : 'msg_berth';

const anthropicUsage = (u: Partial<TokenUsage>) => ({
  input_tokens: u.input ?? 0,
  output_tokens: u.output ?? 0,
});

/** A whole chat completion as an Anthropic message. */
export function chatToMessage(chat: any, requestModel?: string): Record<string, unknown> {
  const choice = chat?.choices?.[0] ?? {};
  const m = choice.message ?? {};
  const content: Record<string, unknown>[] = [];
  const text = typeof m.content === 'string' ? m.content : typeof m.refusal === 'string' ? m.refusal : '';
  if (text) content.push({ type: 'text', text });
  for (const tc of Array.isArray(m.tool_calls) ? m.tool_calls : [])
    if (tc?.function?.name)
      content.push({
        type: 'tool_use',
        id: tc.id,
        name: tc.function.name,
        input: parseInput(tc.function.arguments),
      });
  return {
    id: messageId(chat?.id),
    type: 'message',
    role: 'assistant',
    model: chat?.model ?? requestModel ?? '',
    content,
    stop_reason: stopReason(choice.finish_reason),
    stop_sequence: null,
    usage: anthropicUsage(normalizeUsage(chat?.usage) ?? {}),
  };
}

/** OpenAI SSE in, Anthropic SSE out. `usage` holds the counts seen, for metering. */
export class ChatToMessagesStream extends Transform {
  usage: Partial<TokenUsage> = {};
  firstChunkAt?: number;
  private readonly parser = new SseParser();
  private started = false;
  /** Index of the next Anthropic content block, and the open one (text, or a tool call by its OpenAI index). */
  private blocks = 0;
  private open?: { kind: 'text' } | { kind: 'tool'; call: number };
  /** OpenAI tool call index -> its Anthropic block index. */
  private readonly tools = new Map<number, number>();
  private readonly text: string[] = [];
  private finish: unknown;
  private done = false;

  constructor(
    private readonly requestModel: string,
    private readonly now: () => number = Date.now,
  ) {
    super();
  }

  /** The text streamed so far (for counting a stream cut before its usage). */
  streamed() {
    return { text: this.text.join(''), beyondText: 0 };
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback) {
    this.firstChunkAt ??= this.now();
    let out = '';
    for (const e of this.parser.push(chunk)) out += this.convert(e.data);
    cb(null, out || undefined);
  }

  override _flush(cb: TransformCallback) {
    let out = '';
    for (const e of this.parser.end()) out += this.convert(e.data);
    // A stream that ended without [DONE] still closes as Anthropic's clients expect.
    if (!this.done) out += this.closing();
    cb(null, out || undefined);
  }

  private event(type: string, body: Record<string, unknown>) {
    return sseFrame(JSON.stringify({ type, ...body }), type);
  }

  private start(d: any): string {
    if (this.started) return '';
    this.started = true;
    return this.event('message_start', {
      message: {
        id: messageId(d?.id),
        type: 'message',
        role: 'assistant',
        model: d?.model ?? this.requestModel,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 0, output_tokens: 0 },
      },
    });
  }

  private closeBlock(): string {
    if (!this.open) return '';
    this.open = undefined;
    return this.event('content_block_stop', { index: this.blocks - 1 });
  }

  private closing(): string {
    this.done = true;
    const out = this.start(undefined) + this.closeBlock();
    return (
      out +
      this.event('message_delta', {
        delta: { stop_reason: stopReason(this.finish), stop_sequence: null },
        usage: anthropicUsage(this.usage),
      }) +
      this.event('message_stop', {})
    );
  }

  private convert(data: string): string {
    if (this.done) return '';
    if (data === '[DONE]') return this.closing();
    let d: any;
    try {
      d = JSON.parse(data);
    } catch {
      return '';
    }
    if (d?.error) {
      this.done = true;
      return this.event('error', {
        error: { type: 'api_error', message: d.error.message ?? 'provider error' },
      });
    }
    let out = this.start(d);
    if (d.usage) this.usage = mergeUsage(this.usage, normalizeUsage(d.usage));
    const choice = d.choices?.[0];
    if (!choice) return out;
    const delta = choice.delta ?? {};
    if (typeof delta.content === 'string' && delta.content) {
      if (this.open?.kind !== 'text') {
        out += this.closeBlock();
        this.open = { kind: 'text' };
        out += this.event('content_block_start', {
          index: this.blocks++,
          content_block: { type: 'text', text: '' },
        });
      }
      this.text.push(delta.content);
      out += this.event('content_block_delta', {
        index: this.blocks - 1,
        delta: { type: 'text_delta', text: delta.content },
      });
    }
    for (const tc of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) {
      const call = typeof tc.index === 'number' ? tc.index : 0;
      if (!this.tools.has(call)) {
        out += this.closeBlock();
        this.tools.set(call, this.blocks);
        this.open = { kind: 'tool', call };
        out += this.event('content_block_start', {
          index: this.blocks++,
          content_block: { type: 'tool_use', id: tc.id, name: tc.function?.name, input: {} },
        });
      }
      const args = tc.function?.arguments;
      if (typeof args === 'string' && args) {
        this.text.push(args);
        out += this.event('content_block_delta', {
          index: this.tools.get(call),
          delta: { type: 'input_json_delta', partial_json: args },
        });
      }
    }
    if (choice.finish_reason) this.finish = choice.finish_reason;
    return out;
  }
}
