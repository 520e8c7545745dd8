// What a request may cost before the provider answers: its input tokens (estimated) and the most output
// tokens it may produce (what it asks for, or the model's default maximum).
//
// Input is counted with a real BPE tokenizer (gpt-tokenizer's o200k_base, OpenAI's current encoding; other
// providers' tokenizers differ by a few percent) and settled with the provider's own count afterwards. The
// tokenizer runs on its own thread (token-counter.ts, decision 065): counts of texts seen before are answered
// here at once, from a cache per workspace; a call with a new text waits for one message to the thread and back.
import { tokenCounter } from './token-counter.js';

/**
 * Counts of short texts remembered per workspace: system prompts and earlier turns come back on every call of a
 * conversation, and a cached count needs no round trip to the tokenizer's thread. Keyed by workspace so that one
 * tenant cannot learn from a call's latency whether another sent a given text.
 */
const COUNT_CACHE_MAX = 4_096;
/** Texts longer than this are counted afresh (a cache of long texts would hold megabytes). */
const CACHED_TEXT_CHARS = 4_096;
const counted = new Map<string, Map<string, number>>();
let countedSize = 0;

function remember(workspace: string, text: string, n: number) {
  if (text.length > CACHED_TEXT_CHARS) return;
  let ws = counted.get(workspace);
  if (!ws) {
    ws = new Map();
    counted.set(workspace, ws);
  }
  if (ws.has(text)) return;
  if (countedSize >= COUNT_CACHE_MAX) {
    // The oldest entry of the workspace cached longest goes first.
    const [oldestWs, entries] = counted.entries().next().value!;
    entries.delete(entries.keys().next().value!);
    countedSize--;
    if (!entries.size && oldestWs !== workspace) counted.delete(oldestWs);
  }
  ws.set(text, n);
  countedSize++;
}

/** Tokens the reply is primed with (`<|start|>assistant<|message|>`), counted once per chat request. */
const REPLY_PRIMING = 3;

/**
 * Input reserved for models outside OpenAI's family is the o200k count times this: other tokenizers (e.g.
 * Anthropic's) cut the same text into more pieces. Only the reservation uses it; the provider's count is charged.
 */
export const OTHER_FAMILY_INPUT_MARGIN = 1.25;

/**
 * Output reserved for a call that sets no limit of its own, and its cap under a budget limiting output
 * (BERTH_MODEL_OUTPUT_ESTIMATE overrides it).
 */
export const DEFAULT_OUTPUT_ESTIMATE = 1_024;

/** Tokens counted for an image or file part, whose base64 bytes say little about its token cost. */
export const TOKENS_PER_MEDIA = 1_600;
/** Per-message framing tokens (role markers, separators). */
const TOKENS_PER_MESSAGE = 4;
/** Output reserved for a model not in the table below that asks for no limit. */
export const DEFAULT_MAX_OUTPUT = 4_096;

/** Default output ceilings of well-known models (longest prefix wins). */
const MAX_OUTPUT: [string, number][] = [
  ['gpt-4o-mini', 16_384],
  ['gpt-4o', 16_384],
  ['gpt-4.1', 32_768],
  ['gpt-4-turbo', 4_096],
  ['gpt-4', 8_192],
  ['gpt-3.5-turbo', 4_096],
  ['gpt-5', 128_000],
  ['o1-mini', 65_536],
  ['o1', 100_000],
  ['o3', 100_000],
  ['o4-mini', 100_000],
  ['claude-3-haiku', 4_096],
  ['claude-3-opus', 4_096],
  ['claude-3-sonnet', 4_096],
  ['claude-3-5', 8_192],
  ['claude-3-7-sonnet', 64_000],
  ['claude-sonnet-4', 64_000],
  ['claude-opus-4', 32_000],
  ['claude-haiku-4', 64_000],
  ['gemini-1.5', 8_192],
  ['gemini-2.0', 8_192],
  ['gemini-2.5', 65_536],
  ['mistral-large', 4_096],
  ['deepseek-chat', 8_192],
  ['deepseek-reasoner', 64_000],
  ['grok', 131_072],
].sort((a, b) => (b[0] as string).length - (a[0] as string).length) as [string, number][];

export function defaultMaxOutput(model: string | undefined): number {
  if (!model) return DEFAULT_MAX_OUTPUT;
  const m = model.toLowerCase().replace(/^models\//, '');
  return MAX_OUTPUT.find(([prefix]) => m.startsWith(prefix))?.[1] ?? DEFAULT_MAX_OUTPUT;
}

/** Whether a path produces no output tokens (embeddings). */
export const isEmbeddings = (path: string) => /embed/i.test(path);

/** OpenAI's models, whose tokenizer is the one counted with. */
const OPENAI_FAMILY = /^(gpt-|o\d|chatgpt|text-embedding|davinci|babbage|ft:gpt)/i;

const marginFor = (model: string | undefined) =>
  model && !OPENAI_FAMILY.test(model.replace(/^models\//, '')) ? OTHER_FAMILY_INPUT_MARGIN : 1;

/** The text of a body (to count) and the tokens it holds beyond its text (media, message framing). */
function collect(body: unknown): { texts: string[]; fixed: number } {
  const texts: string[] = [];
  let fixed = 0;
  const walk = (v: unknown, key: string | undefined): void => {
    if (typeof v === 'string') {
      if (v.startsWith('data:') || key === 'data' || key === 'file_data' || key === 'b64_json')
        fixed += TOKENS_PER_MEDIA;
      else if (key !== 'model' && key !== 'role' && key !== 'type') texts.push(v);
      return;
    }
    if (Array.isArray(v)) {
      for (const x of v) walk(x, key);
      return;
    }
    if (v && typeof v === 'object') {
      if (key === 'messages' || key === 'contents' || key === 'input') fixed += TOKENS_PER_MESSAGE;
      // A parsed body's objects hold only own properties: `for…in` reads them without an array of pairs each.
      for (const k in v) walk((v as Record<string, unknown>)[k], k);
    }
  };
  walk(body, undefined);
  if (body && typeof body === 'object' && Array.isArray((body as any).messages)) fixed += REPLY_PRIMING;
  return { texts, fixed };
}

/**
 * The input tokens of a request body: media parts count a flat amount instead of their base64 size. At once when
 * every text was counted before in this workspace; else a promise of one round trip to the tokenizer's thread
 * (which rejects with a 503 when the thread cannot answer, see token-counter.ts).
 */
export function countInputTokens(
  body: unknown,
  model: string | undefined,
  workspace: string,
): number | Promise<number> {
  const { texts, fixed } = collect(body);
  const cache = counted.get(workspace);
  let n = fixed;
  let missing: string[] | undefined;
  for (const t of texts) {
    const c = t.length <= CACHED_TEXT_CHARS ? cache?.get(t) : undefined;
    if (c !== undefined) n += c;
    else if (missing) missing.push(t);
    else missing = [t];
  }
  const margin = marginFor(model);
  if (!missing) return Math.ceil(n * margin);
  const asked = missing;
  return tokenCounter.count(asked).then((counts) => {
    for (let i = 0; i < asked.length; i++) {
      n += counts[i];
      remember(workspace, asked[i], counts[i]);
    }
    return Math.ceil(n * margin);
  });
}

/**
 * The UTF-8 size of a body's texts: no text holds more tokens than bytes (each token stands for at least one),
 * so this bounds the count from above when the tokenizer's thread cannot answer after a call already ran.
 */
export function inputBytesBound(body: unknown): number {
  const { texts, fixed } = collect(body);
  let n = fixed;
  for (const t of texts) n += Buffer.byteLength(t);
  return n;
}

/** Tokens of text an answer streamed (for a stream cut before the provider reported its usage). */
export async function countTextTokens(text: string): Promise<number> {
  return text ? (await tokenCounter.count([text]))[0] : 0;
}
