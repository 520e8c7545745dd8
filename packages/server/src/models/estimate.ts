// What a request may cost before the provider answers: its input tokens (estimated) and the most output
// tokens it may produce (what it asks for, or the model's default maximum).
//
// Input is counted with a real BPE tokenizer (gpt-tokenizer's o200k_base, OpenAI's current encoding; other
// providers' tokenizers differ by a few percent) and settled with the provider's own count afterwards. The
// tokenizer's tables cost 0.3–0.6 s of blocking work and 60 MB to load, so they load once a maxToken policy
// exists (see loadTokenizer), never on a server without budgets.
import { createRequire } from 'node:module';
import { setImmediate as yieldToLoop } from 'node:timers/promises';

const require = createRequire(import.meta.url);
type CountTokens = (text: string, options?: { disallowedSpecial?: Set<string> }) => number;
let counter: CountTokens | undefined;
/**
 * A special token's text (`<|endoftext|>`) in a prompt is counted as the ordinary text providers read it as; the
 * tokenizer's default throws on it, which refused such a call with a 500.
 */
const ORDINARY = { disallowedSpecial: new Set<string>() };

/**
 * Loads the tokenizer's tables (0.3–0.6 s of blocking work, 60 MB). The gateway calls it when a maxToken
 * policy exists or is written, so no model call waits behind it; a call before that loads it itself.
 */
export function loadTokenizer(): void {
  counter ??= (require('gpt-tokenizer/cjs/encoding/o200k_base') as { countTokens: CountTokens }).countTokens;
}

function countTokens(text: string): number {
  if (!counter) loadTokenizer();
  return counter!(text, ORDINARY);
}

/**
 * Counts of short texts remembered: system prompts and earlier turns come back on every call of a
 * conversation, and counting even a short text was the gateway's largest cost per call after I/O.
 */
const COUNT_CACHE_MAX = 4_096;
/** Texts longer than this are counted afresh (a cache of long texts would hold megabytes). */
const CACHED_TEXT_CHARS = 4_096;
const counted = new Map<string, number>();
function countCached(text: string): number {
  if (text.length > CACHED_TEXT_CHARS) return countTokens(text);
  let n = counted.get(text);
  if (n === undefined) {
    n = countTokens(text);
    if (counted.size >= COUNT_CACHE_MAX) counted.delete(counted.keys().next().value!);
    counted.set(text, n);
  }
  return n;
}

/**
 * Characters tokenized in one go before yielding to the event loop: about 3 ms of counting, so a 10 MB prompt
 * never holds other callers for longer than that. Slices end at whitespace, where BPE pieces start anyway;
 * the count may differ from the whole text's by at most one token per slice.
 */
export const COUNT_SLICE_CHARS = 64 * 1024;

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
      for (const [k, x] of Object.entries(v)) walk(x, k);
    }
  };
  walk(body, undefined);
  if (body && typeof body === 'object' && Array.isArray((body as any).messages)) fixed += REPLY_PRIMING;
  return { texts, fixed };
}

/** Counts the tokens of a request body's text; media parts count a flat amount instead of their base64 size. */
export function estimateInputTokens(body: unknown, model?: string): number {
  const { texts, fixed } = collect(body);
  let n = fixed;
  for (const t of texts) n += countCached(t);
  return Math.ceil(n * marginFor(model));
}

/**
 * The same count without holding the event loop: a long text is counted in slices of COUNT_SLICE_CHARS
 * with a yield between them, so one caller's 10 MB prompt delays the others by one slice at a time.
 */
export function countInputTokens(body: unknown, model?: string): number | Promise<number> {
  const { texts, fixed } = collect(body);
  // The common case, a prompt of less than one slice, is counted at once: no promise, no extra turn of the loop.
  let chars = 0;
  for (const t of texts) chars += t.length;
  if (chars <= COUNT_SLICE_CHARS) {
    let n = fixed;
    for (const t of texts) n += countCached(t);
    return Math.ceil(n * marginFor(model));
  }
  return countSliced(texts, fixed, model);
}

async function countSliced(texts: string[], fixed: number, model?: string): Promise<number> {
  let n = fixed;
  let sinceYield = 0;
  for (const text of texts) {
    if (text.length <= COUNT_SLICE_CHARS) {
      n += countCached(text);
      sinceYield += text.length;
    } else
      for (let at = 0; at < text.length; ) {
        let end = Math.min(text.length, at + COUNT_SLICE_CHARS);
        if (end < text.length) {
          const ws = text.lastIndexOf(' ', end);
          if (ws > at) end = ws;
        }
        n += countTokens(text.slice(at, end));
        sinceYield += end - at;
        at = end;
        if (sinceYield >= COUNT_SLICE_CHARS) {
          sinceYield = 0;
          await yieldToLoop();
        }
      }
    if (sinceYield >= COUNT_SLICE_CHARS) {
      sinceYield = 0;
      await yieldToLoop();
    }
  }
  return Math.ceil(n * marginFor(model));
}

/** Tokens of text an answer streamed (for a stream cut before the provider reported its usage). */
export const countTextTokens = (text: string) => (text ? countTokens(text) : 0);
