import assert from 'node:assert/strict';
import { test } from 'node:test';
import { expandWord, expandWords, WordError } from './words.js';

const vars = new Map([
  ['A', 'one'],
  ['EMPTY', ''],
  ['SP', 'a b'],
]);

test("variables expand as Docker's builder expands them; quotes group and go", () => {
  assert.equal(expandWord(`$A/\${A}x`, vars), 'one/onex');
  assert.equal(expandWord(`\${MISSING:-dflt} \${A:-dflt} \${EMPTY:-e}`, vars), 'dflt one e');
  assert.equal(expandWord(`\${A:+alt}\${MISSING:+alt}`, vars), 'alt');
  assert.equal(expandWord(`'$A' "$A" \\$A`, vars), '$A one $A');
  assert.equal(expandWord('"two words"', vars), 'two words');
  assert.deepEqual(expandWords('src/$A "with space" $SP', vars), ['src/one', 'with space', 'a', 'b']);
  assert.equal(expandWord('a`b', vars, '`'), 'ab', 'the escape directive changes the escape character');
  assert.equal(expandWord('$', vars), '$');
});

test('malformed words are refused, not guessed', () => {
  assert.throws(() => expandWord('"open', vars), WordError);
  assert.throws(() => expandWord(`\${A`, vars), WordError);
  assert.throws(() => expandWord(`\${A/x/y}`, vars), /unsupported variable form/);
});
