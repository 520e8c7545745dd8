import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { SseParser, sseFrame } from './sse.js';

const WIRE =
  'event: message_start\ndata: {"a":1}\n\n: comment\r\ndata: line1\r\ndata: line2\r\n\r\ndata: [DONE]\n\n' +
  sseFrame('{"é":"ü"}', 'x');
const EXPECTED = [
  { event: 'message_start', data: '{"a":1}' },
  { event: undefined, data: 'line1\nline2' },
  { event: undefined, data: '[DONE]' },
  { event: 'x', data: '{"é":"ü"}' },
];

test('events are the same however the bytes are split (multi-byte characters included)', () => {
  const bytes = Buffer.from(WIRE, 'utf8');
  fc.assert(
    fc.property(fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 12 }), (cuts) => {
      const p = new SseParser();
      const out = [];
      let at = 0;
      for (const c of [...cuts.sort((a, b) => a - b), bytes.length]) {
        out.push(...p.push(bytes.subarray(at, c)));
        at = c;
      }
      out.push(...p.end());
      assert.deepEqual(out, EXPECTED);
    }),
  );
});

test('a stream ending without the final blank line still yields its last event', () => {
  const p = new SseParser();
  assert.deepEqual(p.push('data: {"x":1}'), []);
  assert.deepEqual(p.end(), [{ event: undefined, data: '{"x":1}' }]);
});
