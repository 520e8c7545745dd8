import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { UsageObserver } from './usage-observer.js';

const chunk = (content: string) =>
  `data: ${JSON.stringify({ id: 'c', choices: [{ index: 0, delta: { content } }], usage: null })}\n\n`;
const USAGE = `data: ${JSON.stringify({ id: 'c', choices: [], usage: { prompt_tokens: 4, completion_tokens: 2 } })}\n\n`;
const STREAM = `${chunk('Hello')}${chunk(' world')}${USAGE}data: [DONE]\n\n`;

async function pass(text: string, cuts: number[], strip: boolean) {
  const o = new UsageObserver('text/event-stream', () => 0, strip);
  const out: Buffer[] = [];
  o.on('data', (b: Buffer) => out.push(Buffer.from(b)));
  const bytes = Buffer.from(text);
  let at = 0;
  for (const c of [...cuts.filter((x) => x > 0 && x < bytes.length)]
    .sort((a, b) => a - b)
    .concat(bytes.length)) {
    if (c > at) o.write(bytes.subarray(at, c));
    at = Math.max(at, c);
  }
  o.end();
  await new Promise((r) => o.on('end', r));
  return { text: Buffer.concat(out).toString(), o };
}

test('the usage-only chunk Berth asked for is removed, however the stream is cut into chunks', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(fc.nat(STREAM.length), { maxLength: 12 }), async (cuts) => {
      const { text, o } = await pass(STREAM, cuts, true);
      assert.equal(text, `${chunk('Hello')}${chunk(' world')}data: [DONE]\n\n`);
      assert.deepEqual(o.usage, { input: 4, output: 2 }, 'still metered');
    }),
  );
});

test('without strip mode every byte passes unchanged', async () => {
  const { text } = await pass(STREAM, [7, 50, 120], false);
  assert.equal(text, STREAM);
});

test('a stream cut before its usage is counted by the text it carried', async () => {
  const { o } = await pass(`${chunk('Hello')}${chunk(' world')}`, [], false);
  assert.deepEqual(o.streamed(), { text: 'Hello world', beyondText: 0 });
});
