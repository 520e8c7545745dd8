// The fake provider's Anthropic half: the Messages API (JSON, and SSE with message_start / content_block_* /
// message_delta usage / message_stop), tool use, the model list and Anthropic's error shape.
import type { ServerResponse } from 'node:http';
import {
  json,
  promptTokens,
  type StreamContext,
  sse,
  stream,
  TOOL_ARGS,
  textOf,
  words,
} from './fake-wire.js';

export const anthropicError = (res: ServerResponse, status: number, message: string) =>
  json(res, status, {
    type: 'error',
    error: { type: status === 429 ? 'rate_limit_error' : 'invalid_request_error', message },
  });

export const anthropicModels = (res: ServerResponse) =>
  json(res, 200, {
    data: [
      { type: 'model', id: 'fake-claude', display_name: 'Fake Claude', created_at: '2025-01-01T00:00:00Z' },
    ],
    has_more: false,
    first_id: 'fake-claude',
    last_id: 'fake-claude',
  });

export function messages(ctx: StreamContext, res: ServerResponse, body: any) {
  if (typeof body.max_tokens !== 'number') return anthropicError(res, 400, 'max_tokens: Field required');
  const model = body.model ?? 'unknown';
  const last = body.messages?.at(-1);
  const toolResult = Array.isArray(last?.content)
    ? last.content.find((b: any) => b.type === 'tool_result')
    : undefined;
  const wantsTool = Array.isArray(body.tools) && body.tools.length > 0 && !toolResult;
  const text = toolResult ? `The tool said: ${textOf(toolResult.content)}` : words(body.max_tokens).join(' ');
  const outTokens = wantsTool ? 12 : toolResult ? text.split(' ').length : body.max_tokens;
  const inTokens = promptTokens(body.messages, body.system);
  const id = 'msg_fake';
  const tool = { type: 'tool_use', id: 'toolu_fake1', name: body.tools?.[0]?.name, input: TOOL_ARGS };
  const stop = wantsTool ? 'tool_use' : toolResult ? 'end_turn' : 'max_tokens';
  if (!body.stream)
    return json(res, 200, {
      id,
      type: 'message',
      role: 'assistant',
      model,
      content: wantsTool ? [{ type: 'text', text: 'Let me check.' }, tool] : [{ type: 'text', text }],
      stop_reason: stop,
      stop_sequence: null,
      usage: { input_tokens: inTokens, output_tokens: outTokens },
    });
  const start = {
    id,
    type: 'message',
    role: 'assistant',
    model,
    content: [],
    stop_reason: null,
    usage: { input_tokens: inTokens, output_tokens: 1 },
  };
  const frames = [
    sse({ type: 'message_start', message: start }, 'message_start'),
    sse({ type: 'ping' }, 'ping'),
  ];
  const delta = (d: unknown) =>
    sse({ type: 'content_block_delta', index: 0, delta: d }, 'content_block_delta');
  if (wantsTool) {
    const args = JSON.stringify(TOOL_ARGS);
    frames.push(
      sse(
        { type: 'content_block_start', index: 0, content_block: { ...tool, input: {} } },
        'content_block_start',
      ),
    );
    frames.push(delta({ type: 'input_json_delta', partial_json: args.slice(0, 5) }));
    frames.push(delta({ type: 'input_json_delta', partial_json: args.slice(5) }));
  } else {
    frames.push(
      sse(
        { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
        'content_block_start',
      ),
    );
    for (const [i, w] of text.split(' ').entries())
      frames.push(delta({ type: 'text_delta', text: i ? ` ${w}` : w }));
  }
  frames.push(sse({ type: 'content_block_stop', index: 0 }, 'content_block_stop'));
  frames.push(
    sse(
      {
        type: 'message_delta',
        delta: { stop_reason: stop, stop_sequence: null },
        usage: { output_tokens: outTokens },
      },
      'message_delta',
    ),
  );
  frames.push(sse({ type: 'message_stop' }, 'message_stop'));
  return stream(ctx, res, frames);
}
