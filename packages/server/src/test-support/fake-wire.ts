// What the fake provider's OpenAI and Anthropic halves share: JSON and SSE answers, a paced stream that
// notices when the client hangs up, and a deterministic text generator (one word = one token).
import type { ServerResponse } from 'node:http';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';

export const WORDS = ['Hello', 'from', 'the', 'fake', 'provider'];
export const TOOL_ARGS = { city: 'Paris' };

/** Per-server stream settings: pace between chunks, and who to tell when a client cuts a stream. */
export interface StreamContext {
  chunkDelayMs: number;
  onCancel(): void;
}

/**
 * Output tokens the fake model writes when its request sets no limit: WORDS.length, or N when a message says
 * `[length N]` (a model that would run long, to show what a call without a limit costs).
 */
export function naturalLength(body: any): number {
  const asked = /\[length (\d+)\]/.exec(
    JSON.stringify(body?.messages ?? body?.input ?? body?.contents ?? ''),
  );
  return asked ? Number(asked[1]) : WORDS.length;
}

/** N output tokens, one word each. */
export const words = (n: number) => Array.from({ length: n }, (_, i) => WORDS[i % WORDS.length]);

export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((p: any) => (typeof p?.text === 'string' ? p.text : typeof p?.content === 'string' ? p.content : ''))
    .join(' ');
}

/** Anthropic-style input tokens as the fake counts them: one per 4 characters of message text. */
export function promptTokens(messages: any[], system?: unknown) {
  const chars = (messages ?? []).map((m: any) => textOf(m.content)).join(' ').length + textOf(system).length;
  return Math.max(1, Math.ceil(chars / 4));
}

export function json(res: ServerResponse, status: number, body: unknown) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    'x-request-id': 'req_fake',
  });
  res.end(text);
}

export const sse = (data: unknown, event?: string) =>
  `${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function stream(ctx: StreamContext, res: ServerResponse, frames: string[]) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  let cut = false;
  res.on('close', () => {
    if (res.writableFinished) return;
    cut = true;
    ctx.onCancel();
  });
  for (const f of frames) {
    if (cut) return;
    res.write(f);
    if (ctx.chunkDelayMs) await sleep(ctx.chunkDelayMs);
  }
  res.end();
}

/**
 * OpenAI's own count of a chat prompt: each message's text in o200k_base plus 3 framing tokens per message
 * and 3 priming the reply (OpenAI's documented recipe), so budgets are tested against a realistic count.
 */
export function openaiPromptTokens(messages: any[]) {
  const list = Array.isArray(messages) ? messages : [];
  // A provider reads a special token's text in user content as ordinary text (the tokenizer's default throws).
  return list.reduce(
    (n: number, m: any) => n + countTokens(textOf(m?.content), { disallowedSpecial: new Set() }) + 3,
    3,
  );
}
