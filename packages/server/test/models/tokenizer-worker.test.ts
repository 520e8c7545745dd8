// Decision 065: the tokenizer runs on its own thread. A budgeted call's new texts are counted there, exactly as
// gpt-tokenizer counts them; the main thread never loads the tokenizer; a thread that crashes mid-count answers
// the call a 503 its client retries, and is replaced so that the next call succeeds.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setImmediate as tick } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { tokenCounter } from '../../src/models/token-counter.js';
import { budget, connection, model, PROVIDER_KEY, runUrl, startWorld, type World } from './setup.js';

const CHILD = new URL('./tokenizer-main-thread.ts', import.meta.url).pathname;

let w: World;

before(async () => {
  w = await startWorld();
  await connection(w.server, 'oa', 'openai', w.fake.url);
  await budget(w.server, 'tw-budget', { total: 1e9, granularity: 'day' });
  await model(w.server, 'tw', {
    integrationConnections: ['oa'],
    policies: ['tw-budget'],
    runtime: { type: 'openai', model: 'gpt-4o-mini' },
  });
});
after(() => w.close());

const chat = (content: string) =>
  fetch(`${runUrl(w.server, 'tw')}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${w.server.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content }], max_tokens: 20 }),
  });

/** A text no call sent before: counted on the tokenizer's thread, not answered from the cache. */
let fresh = 0;
const novel = (chars = 40) =>
  `question ${++fresh} ${'about budgets and tokens '.repeat(chars / 25 + 1)}`.slice(0, chars);

test('after the tokenizer’s thread is killed between calls, the next budgeted call succeeds and a new thread counts it', async () => {
  const first = await chat(novel());
  assert.equal(first.status, 200, await first.text());
  const killed = tokenCounter.current!;
  assert.ok(killed, 'a budgeted call with a new text started the thread');
  await killed.terminate();
  const next = await chat(novel());
  assert.equal(next.status, 200, await next.text());
  assert.ok(tokenCounter.current && tokenCounter.current !== killed, 'a new thread is running');
});

/** Waits until the gateway has asked the tokenizer's thread for a count, then kills the thread. */
async function killMidCount() {
  while (!tokenCounter.inFlight) await tick();
  await tokenCounter.current!.terminate();
}

test('a call whose count is in flight when the thread dies gets a 503 problem saying to retry; the retry succeeds', async () => {
  const answer = chat(novel(2_000_000));
  await killMidCount();
  const res = await answer;
  assert.equal(res.status, 503);
  assert.equal(res.headers.get('retry-after'), '1');
  const problem: any = await res.json();
  assert.equal(problem.error.code, 'UNAVAILABLE');
  assert.match(
    problem.detail,
    /could not be counted for its budget: the token counter stopped .*retry in 1 s/,
  );
  const retried = await chat(novel(2_000_000));
  assert.equal(retried.status, 200, await retried.text());
});

test('the openai client retries that 503 on its own and its call succeeds', async () => {
  const client = new OpenAI({
    apiKey: w.server.adminKey,
    baseURL: `${runUrl(w.server, 'tw')}/v1`,
    maxRetries: 2,
  });
  const calls = w.fake.requests.length;
  const answer = client.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: novel(2_000_000) }],
    max_tokens: 20,
  });
  await killMidCount();
  const done = await answer;
  assert.equal(done.object, 'chat.completion');
  assert.equal(w.fake.requests.length, calls + 1, 'the provider was asked once, by the retry');
});

test('a server’s main thread never loads the tokenizer, and its process exits once the server closed', async () => {
  // A process of its own: this one loaded gpt-tokenizer for the fake provider.
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
    env: { ...process.env, FAKE_URL: w.fake.url, FAKE_KEY: PROVIDER_KEY },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  const [code] = await once(child, 'exit');
  assert.equal(code, 0, out);
  const report = JSON.parse(out.trim().split('\n').at(-1)!);
  assert.equal(report.status, 200);
  assert.ok(report.countedOnThread, 'the call’s text was counted by the tokenizer’s thread');
  assert.deepEqual(report.tokenizerModules, [], 'no gpt-tokenizer module on the main thread');
  assert.ok(report.modulesSeen > 100, 'the trace saw the server’s own modules load');
});
