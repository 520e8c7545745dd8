// The fake provider's OpenAI half: chat completions (JSON, and SSE with `usage: null` chunks and a final
// usage chunk when asked), tool calls, the Responses API, embeddings (float or base64), and its error shape.
import type { ServerResponse } from 'node:http';
import {
  json,
  naturalLength,
  openaiPromptTokens,
  type StreamContext,
  stream,
  TOOL_ARGS,
  textOf,
  words,
} from './fake-wire.js';

const EMBED_DIMS = 8;

export const openaiError = (res: ServerResponse, status: number, message: string) =>
  json(res, status, {
    error: {
      message,
      type: status === 429 ? 'rate_limit_error' : 'invalid_request_error',
      param: null,
      code: null,
    },
  });

export const openaiModels = (res: ServerResponse) =>
  json(res, 200, {
    object: 'list',
    data: [{ id: 'fake-gpt', object: 'model', created: 1_700_000_000, owned_by: 'fake' }],
  });

export function chatCompletions(ctx: StreamContext, res: ServerResponse, body: any) {
  const model = body.model ?? 'unknown';
  const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? naturalLength(body);
  const last = body.messages?.at(-1);
  const wantsTool = Array.isArray(body.tools) && body.tools.length > 0 && last?.role !== 'tool';
  const text = last?.role === 'tool' ? `The tool said: ${textOf(last.content)}` : words(maxTokens).join(' ');
  const outTokens = wantsTool ? 12 : last?.role === 'tool' ? text.split(' ').length : maxTokens;
  const input = openaiPromptTokens(body.messages);
  const usage = { prompt_tokens: input, completion_tokens: outTokens, total_tokens: input + outTokens };
  const id = 'chatcmpl-fake';
  const created = 1_700_000_000;
  const name = body.tools?.[0]?.function?.name;
  const toolCall = {
    id: 'call_fake1',
    type: 'function',
    function: { name, arguments: JSON.stringify(TOOL_ARGS) },
  };
  const finish = wantsTool ? 'tool_calls' : 'stop';
  if (!body.stream) {
    const message = {
      role: 'assistant',
      content: wantsTool ? null : text,
      refusal: null,
      ...(wantsTool ? { tool_calls: [toolCall] } : {}),
    };
    return json(res, 200, {
      id,
      object: 'chat.completion',
      created,
      model,
      choices: [{ index: 0, message, logprobs: null, finish_reason: finish }],
      usage,
    });
  }
  const withUsage = body.stream_options?.include_usage === true;
  const chunk = (delta: unknown, finish_reason: string | null = null) => {
    const c = {
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason }],
    };
    return `data: ${JSON.stringify(withUsage ? { ...c, usage: null } : c)}\n\n`;
  };
  const frames = [chunk({ role: 'assistant', content: '' })];
  if (wantsTool) {
    const args = toolCall.function.arguments;
    frames.push(
      chunk({
        tool_calls: [{ index: 0, id: toolCall.id, type: 'function', function: { name, arguments: '' } }],
      }),
    );
    frames.push(chunk({ tool_calls: [{ index: 0, function: { arguments: args.slice(0, 5) } }] }));
    frames.push(chunk({ tool_calls: [{ index: 0, function: { arguments: args.slice(5) } }] }));
  } else for (const [i, w] of text.split(' ').entries()) frames.push(chunk({ content: i ? ` ${w}` : w }));
  frames.push(chunk({}, finish));
  if (withUsage)
    frames.push(
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [], usage })}\n\n`,
    );
  frames.push('data: [DONE]\n\n');
  return stream(ctx, res, frames);
}

export function embeddings(res: ServerResponse, body: any) {
  const inputs: string[] = Array.isArray(body.input) ? body.input : [body.input];
  const data = inputs.map((s, index) => {
    const v = Array.from({ length: EMBED_DIMS }, (_, i) => ((String(s).length + i) % 10) / 10);
    const embedding =
      body.encoding_format === 'base64' ? Buffer.from(new Float32Array(v).buffer).toString('base64') : v;
    return { object: 'embedding', index, embedding };
  });
  const tokens = inputs.reduce((n, s) => n + Math.ceil(String(s).length / 4), 0);
  json(res, 200, {
    object: 'list',
    data,
    model: body.model,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  });
}

export function responses(res: ServerResponse, body: any) {
  const n = body.max_output_tokens ?? naturalLength(body);
  const input = Math.ceil(textOf(body.input).length / 4) || 1;
  json(res, 200, {
    id: 'resp_fake',
    object: 'response',
    created_at: 1_700_000_000,
    status: 'completed',
    model: body.model,
    output: [
      {
        type: 'message',
        id: 'msg_fake',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: words(n).join(' '), annotations: [] }],
      },
    ],
    usage: { input_tokens: input, output_tokens: n, total_tokens: input + n },
  });
}
