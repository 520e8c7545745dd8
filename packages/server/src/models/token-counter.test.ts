import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { countInputTokens } from './estimate.js';
import { COUNT_SLICE_CHARS } from './token-counter-wire.js';
import { TokenCounter, tokenCounter } from './token-counter.js';

after(() => tokenCounter.stop());

/** gpt-tokenizer called here, on the test's own thread, as the gateway called it before decision 065. */
const direct = (text: string) => countTokens(text, { disallowedSpecial: new Set() });

/** The count of a text longer than one slice: the sum over slices that end at the last space before the limit. */
function directSliced(text: string): number {
  if (text.length <= COUNT_SLICE_CHARS) return direct(text);
  let n = 0;
  for (let at = 0; at < text.length; ) {
    let end = Math.min(text.length, at + COUNT_SLICE_CHARS);
    if (end < text.length) {
      const ws = text.lastIndexOf(' ', end);
      if (ws > at) end = ws;
    }
    n += direct(text.slice(at, end));
    at = end;
  }
  return n;
}

const longPrompt = (chars: number) => {
  const sentence = 'The gateway counts every prompt before a provider sees it, 42 times over. ';
  return sentence.repeat(Math.ceil(chars / sentence.length)).slice(0, chars);
};

const TEXTS = [
  '',
  'Say hello',
  '<|endoftext|> and <|endofprompt|>',
  'Explain <|fim_prefix|>, <|fim_middle|> and <|im_start|>user in one line.',
  'naïve café, Ελληνικά, русский, 日本語のテキスト, 한국어, עברית, العربية',
  'emoji 👋🏽👨‍👩‍👧‍👦🇫🇷 and a lone surrogate \ud800 here',
  'e\u0301 combining, zero\u200bwidth, tabs\tand\nnewlines\r\n',
  'function f(x) { return x ** 2; } // code, with punctuation: ;;; ===',
  longPrompt(COUNT_SLICE_CHARS - 10),
  longPrompt(300_000),
  `data:${'QUJD+/9'.repeat(20_000)}`, // base64-like: short pieces, counted exactly
];

test('counts on the tokenizer’s thread equal gpt-tokenizer’s, special-token text, unicode and long prompts included', async () => {
  const counts = await tokenCounter.count(TEXTS);
  assert.deepEqual(counts, TEXTS.map(directSliced));
  assert.equal(counts[2], 15, '<|endoftext|> counted as ordinary text (decision 060)');
  // Texts within one slice are gpt-tokenizer's count of the whole text, exactly.
  for (const [i, t] of TEXTS.entries()) if (t.length <= COUNT_SLICE_CHARS) assert.equal(counts[i], direct(t));
});

test('a run of one class of characters (letters, symbols, spaces) is counted in chunks, within a token per chunk', async () => {
  // Each is one BPE piece, whose merge cost grows with the square of its length (40,000 emoji took 18 s).
  const runs = ['x'.repeat(8_192), '🙂'.repeat(3_000), ' '.repeat(8_192), `ask: ${'ab'.repeat(3_000)} done`];
  const counts = await tokenCounter.count(runs);
  for (const [i, t] of runs.entries()) {
    const whole = direct(t);
    assert.ok(
      Math.abs(counts[i] - whole) <= Math.ceil(t.length / 512),
      `${i}: whole ${whole}, chunked ${counts[i]}`,
    );
  }
});

test('a long prompt counted in slices is within one token per slice of the whole count', async () => {
  const text = longPrompt(1_000_000);
  const [sliced] = await tokenCounter.count([text]);
  const whole = direct(text);
  assert.ok(
    Math.abs(whole - sliced) <= Math.ceil(text.length / COUNT_SLICE_CHARS),
    `whole ${whole}, sliced ${sliced}`,
  );
});

test('a call’s new texts go to the thread in one message', async () => {
  tokenCounter.start(); // a no-op while no gateway uses the counter
  await tokenCounter.count(['warm up']);
  const w = tokenCounter.current!;
  const sent: unknown[] = [];
  const post = w.postMessage.bind(w);
  w.postMessage = (m: unknown) => {
    sent.push(m);
    post(m);
  };
  const body = {
    messages: [
      { role: 'system', content: 'one message for all of these' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'first part' },
          { type: 'text', text: 'second part' },
        ],
      },
      { role: 'assistant', content: 'third' },
      { role: 'user', content: 'fourth' },
    ],
  };
  await countInputTokens(body, 'gpt-4o', 'one-message');
  w.postMessage = post;
  assert.equal(sent.length, 1);
  assert.equal((sent[0] as { texts: string[] }).texts.length, 5);
});

test('a short count asked after a 10 MB one is answered first: the long one yields between slices', async () => {
  const order: string[] = [];
  const long = tokenCounter.count([longPrompt(10 * 1024 * 1024)]).then(() => order.push('long'));
  const short = tokenCounter.count(['a short question']).then(() => order.push('short'));
  await Promise.all([long, short]);
  assert.deepEqual(order, ['short', 'long']);
});

test('a thread that stops fails the counts in flight with a 503 and is replaced; the next count succeeds', async () => {
  const counter = new TokenCounter();
  counter.retain();
  try {
    assert.deepEqual(await counter.count(['before the crash']), [direct('before the crash')]);
    const first = counter.current!;
    const inFlight = counter.count([longPrompt(1_000_000)]);
    const exited = once(first, 'exit');
    await first.terminate(); // as if the thread crashed: not through the counter
    await exited;
    await assert.rejects(inFlight, (err: any) => {
      assert.equal(err.status, 503);
      assert.equal(err.headers['retry-after'], '1');
      assert.match(err.detail, /token counter stopped/);
      return true;
    });
    const second = counter.current;
    assert.ok(second && second !== first, 'a thread that had loaded its tables is replaced at once');
    assert.deepEqual(await counter.count(['after the crash']), [direct('after the crash')]);
    assert.equal(counter.current, second);
  } finally {
    await counter.release();
  }
  assert.equal(counter.current, undefined, 'the last release stops the thread');
});

test('a thread that does not answer within the deadline is stopped, its counts fail with a 503, and a new one starts', async () => {
  // A thread that says it is ready and then never answers (a tokenizer stuck in a loop).
  let started = 0;
  const counter = new TokenCounter({
    spawn: () => {
      started++;
      return new Worker(
        "const { parentPort } = require('node:worker_threads'); parentPort.on('message', () => {}); parentPort.postMessage({ ready: true });",
        { eval: true },
      );
    },
    deadlineMs: 50,
    loadDeadlineMs: 0,
  });
  counter.retain();
  try {
    const pending = counter.count(['never answered']);
    const first = counter.current!;
    const exited = once(first, 'exit');
    await assert.rejects(pending, (err: any) => {
      assert.equal(err.status, 503);
      assert.match(err.detail, /did not answer within \d+ ms/);
      return true;
    });
    await exited;
    assert.equal(counter.inFlight, 0);
    // The next count goes to a new thread (started at once when the stuck one had loaded, else by this count).
    const again = counter.count(['again']);
    assert.equal(started, 2);
    assert.ok(counter.current && counter.current !== first);
    await assert.rejects(again, { status: 503 });
  } finally {
    await counter.release();
  }
});
