// Anthropic Messages answers as OpenAI chat completions: a whole message, or a stream of Anthropic events
// turned into `chat.completion.chunk` events as each arrives (text deltas, tool calls with their argument
// fragments, the finish reason, usage when the caller asked for it, then `[DONE]`).
import { Transform, type TransformCallback } from 'node:stream';
import { SseParser, sseFrame } from '../stream/sse.js';
import { mergeUsage, normalizeUsage, type TokenUsage } from '../usage.js';

const FINISH: Record<string, string> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  pause_turn: 'stop',
  max_tokens: 'length',
  tool_use: 'tool_calls',
  refusal: 'content_filter',
};

export const finishReason = (stop: unknown) => (typeof stop === 'string' ? (FINISH[stop] ?? 'stop') : null);

const openAiUsage = (u: Partial<TokenUsage>) => ({
  prompt_tokens: u.input ?? 0,
  completion_tokens: u.output ?? 0,
  total_tokens: (u.input ?? 0) + (u.output ?? 0),
});

/**
 * A whole Anthropic message as a chat completion. With `structured` (the request asked for JSON), the call
 * of that tool is the answer: its input becomes the content and the finish reason `stop`.
 */
export function messageToChat(msg: any, nowS: number, structured?: string): Record<string, unknown> {
  const blocks: any[] = Array.isArray(msg?.content) ? msg.content : [];
  const answer = structured ? blocks.find((b) => b.type === 'tool_use' && b.name === structured) : undefined;
  const text = answer
    ? JSON.stringify(answer.input ?? {})
    : blocks
        .filter((b) => b.type === 'text')
        .map((b) => b.text)
        .join('');
  const toolCalls = blocks
    .filter((b) => b.type === 'tool_use' && b !== answer && b.name !== structured)
    .map((b) => ({
      id: b.id,
      type: 'function',
      function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) },
    }));
  return {
    id: msg?.id,
    object: 'chat.completion',
    created: nowS,
    model: msg?.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: text || (toolCalls.length ? null : ''),
          refusal: null,
          ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
        },
        logprobs: null,
        finish_reason: answer && !toolCalls.length ? 'stop' : finishReason(msg?.stop_reason),
      },
    ],
    usage: openAiUsage(normalizeUsage(msg?.usage) ?? {}),
  };
}

/** Anthropic SSE in, OpenAI SSE out. `usage` holds the counts seen, for metering. */
export class AnthropicToChatStream extends Transform {
  usage: Partial<TokenUsage> = {};
  firstChunkAt?: number;
  private readonly parser = new SseParser();
  private id = '';
  private model = '';
  /** Anthropic content block index -> OpenAI tool call index. */
  private readonly tools = new Map<number, number>();
  /** Content block index of the structured-output tool call, streamed as content. */
  private structuredBlock?: number;
  /** Generated text seen (for counting a stream cut before its usage arrived). */
  private readonly text: string[] = [];
  private finish: string | null = null;
  private done = false;

  constructor(
    private readonly includeUsage: boolean,
    private readonly nowS: number,
    private readonly now: () => number = Date.now,
    /** The structured-output tool whose arguments are the answer's content (see messageToChat). */
    private readonly structured?: string,
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
    for (const e of this.parser.push(chunk)) out += this.convert(e.event, e.data);
    cb(null, out || undefined);
  }

  override _flush(cb: TransformCallback) {
    let out = '';
    for (const e of this.parser.end()) out += this.convert(e.event, e.data);
    if (!this.done) out += this.closing();
    cb(null, out || undefined);
  }

  private chunk(delta: Record<string, unknown>, finish: string | null = null) {
    return sseFrame(
      JSON.stringify({
        id: this.id,
        object: 'chat.completion.chunk',
        created: this.nowS,
        model: this.model,
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      }),
    );
  }

  private closing() {
    this.done = true;
    let out = '';
    if (this.includeUsage)
      out += sseFrame(
        JSON.stringify({
          id: this.id,
          object: 'chat.completion.chunk',
          created: this.nowS,
          model: this.model,
          choices: [],
          usage: openAiUsage(this.usage),
        }),
      );
    return `${out}data: [DONE]\n\n`;
  }

  private convert(event: string | undefined, data: string): string {
    let d: any;
    try {
      d = JSON.parse(data);
    } catch {
      return '';
    }
    switch (event ?? d.type) {
      case 'message_start':
        this.id = d.message?.id ?? '';
        this.model = d.message?.model ?? '';
        this.usage = mergeUsage(this.usage, normalizeUsage(d.message?.usage));
        return this.chunk({ role: 'assistant', content: '' });
      case 'content_block_start': {
        const b = d.content_block;
        if (b?.type === 'tool_use' && this.structured && b.name === this.structured) {
          this.structuredBlock = d.index;
          return '';
        }
        if (b?.type === 'tool_use') {
          const index = this.tools.size;
          this.tools.set(d.index, index);
          return this.chunk({
            tool_calls: [{ index, id: b.id, type: 'function', function: { name: b.name, arguments: '' } }],
          });
        }
        if (b?.type === 'text' && b.text) {
          this.text.push(b.text);
          return this.chunk({ content: b.text });
        }
        return '';
      }
      case 'content_block_delta': {
        const delta = d.delta;
        if (typeof delta?.text === 'string') this.text.push(delta.text);
        else if (typeof delta?.partial_json === 'string') this.text.push(delta.partial_json);
        else if (typeof delta?.thinking === 'string') this.text.push(delta.thinking);
        if (delta?.type === 'text_delta') return this.chunk({ content: delta.text });
        if (delta?.type === 'input_json_delta' && d.index === this.structuredBlock)
          return this.chunk({ content: delta.partial_json });
        if (delta?.type === 'input_json_delta' && this.tools.has(d.index))
          return this.chunk({
            tool_calls: [{ index: this.tools.get(d.index), function: { arguments: delta.partial_json } }],
          });
        return '';
      }
      case 'message_delta':
        this.usage = mergeUsage(this.usage, normalizeUsage(d.usage));
        this.finish =
          this.structuredBlock !== undefined && !this.tools.size
            ? 'stop'
            : finishReason(d.delta?.stop_reason);
        return this.chunk({}, this.finish ?? 'stop');
      case 'message_stop':
        return this.closing();
      case 'error':
        this.done = true;
        return sseFrame(
          JSON.stringify({
            error: { message: d.error?.message ?? 'provider error', type: d.error?.type ?? 'api_error' },
          }),
        );
      default:
        return '';
    }
  }
}
