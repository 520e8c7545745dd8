// The fake provider's Gemini half: the native generateContent API (`/v1beta/models/<m>:generateContent`,
// JSON, and `:streamGenerateContent?alt=sse`), with usageMetadata, answering as many words as
// generationConfig.maxOutputTokens allows.
import type { ServerResponse } from 'node:http';
import { json, naturalLength, type StreamContext, stream, textOf, words } from './fake-wire.js';

/** `…/models/<model>:<method>` of Gemini's native API. */
export const GEMINI_PATH = /^\/v1(?:beta)?\/models\/([^/:]+):(generateContent|streamGenerateContent)$/;

export function generateContent(
  ctx: StreamContext,
  res: ServerResponse,
  model: string,
  streamed: boolean,
  body: any,
) {
  const limit = body?.generationConfig?.maxOutputTokens;
  const n = typeof limit === 'number' ? limit : naturalLength(body);
  const text = words(n).join(' ');
  const prompt = (body?.contents ?? []).map((c: any) => textOf(c?.parts)).join(' ');
  const promptTokens = Math.max(1, Math.ceil(prompt.length / 4));
  const usageMetadata = {
    promptTokenCount: promptTokens,
    candidatesTokenCount: n,
    totalTokenCount: promptTokens + n,
  };
  const candidate = (t: string, finishReason?: string) => ({
    content: { parts: [{ text: t }], role: 'model' },
    index: 0,
    ...(finishReason ? { finishReason } : {}),
  });
  const finish = typeof limit === 'number' ? 'MAX_TOKENS' : 'STOP';
  if (!streamed)
    return json(res, 200, { candidates: [candidate(text, finish)], usageMetadata, modelVersion: model });
  const parts = text.split(' ');
  const frames = parts.map(
    (w, i) =>
      `data: ${JSON.stringify({
        candidates: [candidate(i ? ` ${w}` : w, i === parts.length - 1 ? finish : undefined)],
        usageMetadata,
        modelVersion: model,
      })}\r\n\r\n`,
  );
  return stream(ctx, res, frames);
}
