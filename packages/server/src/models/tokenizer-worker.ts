// The thread that owns the tokenizer (decision 065). gpt-tokenizer's o200k_base tables are about 400,000 heap
// objects: on the server's main thread every full garbage collection marked them (20 ms a collection instead of
// 3), which was the model gateway's p99 under a budget. Here they sit on this thread's own heap, which the main
// thread's collector never walks. Started by token-counter.ts only; nothing else imports this file.
import { createRequire } from 'node:module';
import { setImmediate as yieldToQueue } from 'node:timers/promises';
import { parentPort } from 'node:worker_threads';
import { COUNT_SLICE_CHARS, type CountAnswer, type CountAsk } from './token-counter-wire.js';

type CountTokens = (text: string, options?: { disallowedSpecial?: Set<string> }) => number;

/**
 * A special token's text (`<|endoftext|>`) in a prompt is counted as the ordinary text providers read it as
 * (decision 060): the tokenizer's default throws on it.
 */
const ORDINARY = { disallowedSpecial: new Set<string>() };

const port = parentPort;
if (!port) throw new Error('tokenizer-worker.ts runs as a worker thread only (see token-counter.ts)');

const countTokens = (
  createRequire(import.meta.url)('gpt-tokenizer/cjs/encoding/o200k_base') as {
    countTokens: CountTokens;
  }
).countTokens;

/**
 * A run of one class of characters (letters, symbols, whitespace) is one BPE piece, and merging a piece costs the
 * square of its length: 64K of one letter took 3.5 s, 40,000 emoji 18 s, which a single call could send. Runs this
 * long are counted in chunks of LONG_RUN_CHUNK characters, each near-linear; a count then differs from the whole
 * run's by about a token per chunk boundary (tested within one per chunk). Texts without such a run (prose, code,
 * base64) are counted exactly as before.
 */
const LONG_RUN = /[\p{L}\p{M}]{1024,}|[^\s\p{L}\p{M}\p{N}]{1024,}|\s{1024,}/gu;
const LONG_RUN_MIN = 1_024;
const LONG_RUN_CHUNK = 512;

function countPiecewise(text: string): number {
  if (text.length < LONG_RUN_MIN) return countTokens(text, ORDINARY);
  let n = 0;
  let at = 0;
  for (const m of text.matchAll(LONG_RUN)) {
    if (m.index > at) n += countTokens(text.slice(at, m.index), ORDINARY);
    const end = m.index + m[0].length;
    for (let i = m.index; i < end; ) {
      let e = Math.min(end, i + LONG_RUN_CHUNK);
      // A chunk never ends between the two halves of a surrogate pair.
      const last = text.charCodeAt(e - 1);
      if (e < end && last >= 0xd800 && last < 0xdc00) e++;
      n += countTokens(text.slice(i, e), ORDINARY);
      i = e;
    }
    at = end;
  }
  if (at === 0) return countTokens(text, ORDINARY);
  if (at < text.length) n += countTokens(text.slice(at), ORDINARY);
  return n;
}

async function countAll(texts: string[]): Promise<number[]> {
  const counts: number[] = [];
  let sinceYield = 0;
  for (const text of texts) {
    let n = 0;
    if (text.length <= COUNT_SLICE_CHARS) {
      n = countPiecewise(text);
      sinceYield += text.length;
    } else
      for (let at = 0; at < text.length; ) {
        let end = Math.min(text.length, at + COUNT_SLICE_CHARS);
        if (end < text.length) {
          const ws = text.lastIndexOf(' ', end);
          if (ws > at) end = ws;
        }
        n += countPiecewise(text.slice(at, end));
        sinceYield += end - at;
        at = end;
        if (sinceYield >= COUNT_SLICE_CHARS) {
          sinceYield = 0;
          await yieldToQueue();
        }
      }
    counts.push(n);
    if (sinceYield >= COUNT_SLICE_CHARS) {
      sinceYield = 0;
      await yieldToQueue();
    }
  }
  return counts;
}

port.on('message', (ask: CountAsk) => {
  countAll(ask.texts).then(
    (counts) => port.postMessage({ id: ask.id, counts } satisfies CountAnswer),
    (err: unknown) => port.postMessage({ id: ask.id, error: String(err) } satisfies CountAnswer),
  );
});
// The tables are loaded (above, before any ask is read): asks from now on are answered at counting speed.
port.postMessage({ ready: true } satisfies CountAnswer);
