// OpenAI's Responses API on endpoints whose provider does not speak it, answer side: the chat answer Berth
// translated from Anthropic's, whole or streamed, as a Response object or as `response.*` stream events
// (responses-request.ts is the request side).
import { Transform, type TransformCallback } from 'node:stream';
import { SseParser, sseFrame } from '../stream/sse.js';

type Json = Record<string, any>;

const usageOf = (u: Json | undefined) => {
  const input = u?.prompt_tokens ?? 0;
  const output = u?.completion_tokens ?? 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input + output,
  };
};

const messageItem = (id: string, text: string, status = 'completed') => ({
  type: 'message',
  id,
  status,
  role: 'assistant',
  content: status === 'completed' ? [{ type: 'output_text', text, annotations: [] }] : [],
});

const callItem = (c: Json, status = 'completed') => ({
  type: 'function_call',
  id: `fc_${c.id}`,
  call_id: c.id,
  name: c.function?.name ?? '',
  arguments: c.function?.arguments ?? '',
  status,
});

function responseShell(
  id: string,
  model: string,
  nowS: number,
  status: string,
  output: Json[],
  usage?: Json,
) {
  return {
    id: `resp_${id}`,
    object: 'response',
    created_at: nowS,
    status,
    model,
    output,
    ...(status === 'incomplete' ? { incomplete_details: { reason: 'max_output_tokens' } } : {}),
    usage: usage ? usageOf(usage) : null,
  };
}

/** A whole chat completion as a Response. */
export function chatToResponse(chat: Json, nowS: number): Json {
  const choice = chat.choices?.[0] ?? {};
  const msg = choice.message ?? {};
  const output: Json[] = [];
  if (typeof msg.content === 'string' && msg.content) output.push(messageItem(`msg_${chat.id}`, msg.content));
  for (const c of msg.tool_calls ?? []) output.push(callItem(c));
  const status = choice.finish_reason === 'length' ? 'incomplete' : 'completed';
  return responseShell(chat.id ?? '', chat.model ?? '', nowS, status, output, chat.usage);
}

/** Chat completion chunks (SSE) in, Responses stream events out. */
export class ChatToResponsesStream extends Transform {
  private readonly parser = new SseParser();
  private seq = 0;
  private id = '';
  private model = '';
  private started = false;
  private text?: { index: number; id: string; text: string };
  private readonly calls = new Map<number, { index: number; call: Json }>();
  private output: Json[] = [];
  private finish: string | null = null;
  private usage?: Json;
  private done = false;

  constructor(private readonly nowS: number) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback) {
    let out = '';
    for (const e of this.parser.push(chunk)) out += this.convert(e.data);
    cb(null, out || undefined);
  }

  override _flush(cb: TransformCallback) {
    let out = '';
    for (const e of this.parser.end()) out += this.convert(e.data);
    if (!this.done) out += this.complete();
    cb(null, out || undefined);
  }

  private emit1(type: string, body: Json) {
    return sseFrame(JSON.stringify({ type, sequence_number: this.seq++, ...body }), type);
  }

  private start(): string {
    if (this.started) return '';
    this.started = true;
    return this.emit1('response.created', {
      response: responseShell(this.id, this.model, this.nowS, 'in_progress', []),
    });
  }

  private closeText(): string {
    const t = this.text;
    if (!t) return '';
    this.text = undefined;
    const item = messageItem(t.id, t.text);
    this.output[t.index] = item;
    const at = { item_id: t.id, output_index: t.index, content_index: 0 };
    return (
      this.emit1('response.output_text.done', { ...at, text: t.text }) +
      this.emit1('response.content_part.done', { ...at, part: item.content[0] }) +
      this.emit1('response.output_item.done', { output_index: t.index, item })
    );
  }

  private closeCalls(): string {
    let out = '';
    for (const { index, call } of this.calls.values()) {
      const item = callItem(call);
      this.output[index] = item;
      out += this.emit1('response.function_call_arguments.done', {
        item_id: item.id,
        output_index: index,
        arguments: item.arguments,
      });
      out += this.emit1('response.output_item.done', { output_index: index, item });
    }
    this.calls.clear();
    return out;
  }

  private complete(): string {
    this.done = true;
    const status = this.finish === 'length' ? 'incomplete' : 'completed';
    const type = status === 'incomplete' ? 'response.incomplete' : 'response.completed';
    return (
      this.start() +
      this.closeText() +
      this.closeCalls() +
      this.emit1(type, {
        response: responseShell(
          this.id,
          this.model,
          this.nowS,
          status,
          this.output.filter(Boolean),
          this.usage,
        ),
      })
    );
  }

  private convert(data: string): string {
    if (this.done) return '';
    if (data === '[DONE]') return this.complete();
    let c: Json;
    try {
      c = JSON.parse(data);
    } catch {
      return '';
    }
    if (c.error) {
      this.done = true;
      return this.emit1('error', { code: c.error.type ?? 'api_error', message: c.error.message ?? 'error' });
    }
    this.id ||= c.id ?? '';
    this.model ||= c.model ?? '';
    let out = this.start();
    if (c.usage) this.usage = c.usage;
    const choice = c.choices?.[0];
    if (!choice) return out;
    const d = choice.delta ?? {};
    if (typeof d.content === 'string' && d.content) {
      if (!this.text) {
        const index = this.output.length;
        this.output.push({});
        this.text = { index, id: `msg_${this.id}`, text: '' };
        out += this.emit1('response.output_item.added', {
          output_index: index,
          item: messageItem(this.text.id, '', 'in_progress'),
        });
        out += this.emit1('response.content_part.added', {
          item_id: this.text.id,
          output_index: index,
          content_index: 0,
          part: { type: 'output_text', text: '', annotations: [] },
        });
      }
      this.text.text += d.content;
      out += this.emit1('response.output_text.delta', {
        item_id: this.text.id,
        output_index: this.text.index,
        content_index: 0,
        delta: d.content,
      });
    }
    for (const tc of d.tool_calls ?? []) {
      let entry = this.calls.get(tc.index);
      if (!entry) {
        out += this.closeText();
        const index = this.output.length;
        this.output.push({});
        entry = { index, call: { id: tc.id, function: { name: tc.function?.name ?? '', arguments: '' } } };
        this.calls.set(tc.index, entry);
        out += this.emit1('response.output_item.added', {
          output_index: index,
          item: callItem(
            { ...entry.call, function: { ...entry.call.function, arguments: '' } },
            'in_progress',
          ),
        });
      }
      const delta = tc.function?.arguments;
      if (typeof delta === 'string' && delta) {
        entry.call.function.arguments += delta;
        out += this.emit1('response.function_call_arguments.delta', {
          item_id: `fc_${entry.call.id}`,
          output_index: entry.index,
          delta,
        });
      }
    }
    if (choice.finish_reason) this.finish = choice.finish_reason;
    return out;
  }
}
