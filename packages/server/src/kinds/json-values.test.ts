// copyJson and sameJson stand in for structuredClone and a JSON.stringify comparison on the write path: they must
// answer exactly as those did for every JSON value.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { copyJson, copyShallow, sameJson } from './json-values.js';

const cases: unknown[] = [
  null,
  0,
  -0,
  1.5,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  '',
  'a',
  true,
  false,
  [],
  {},
  [1, 'a', null],
  [1, undefined, 2],
  [1, null, 2],
  { a: 1, b: { c: [1, 2, { d: 'x' }] } },
  { b: { c: [1, 2, { d: 'x' }] }, a: 1 },
  { a: 1, b: undefined },
  { a: 1 },
  { a: null },
  { 1: 'x', a: 'y' },
  { a: 'y', 1: 'x' },
  { a: [] },
  { a: {} },
  { a: new Date(0) },
  { a: new Date(1) },
  { a: '1970-01-01T00:00:00.000Z' },
];

test('sameJson answers as comparing the two JSON.stringify texts, for every pair of values', () => {
  for (const a of cases)
    for (const b of cases)
      assert.equal(
        sameJson(a, b),
        JSON.stringify(a) === JSON.stringify(b),
        `${JSON.stringify(a)} vs ${JSON.stringify(b)}`,
      );
});

test('sameJson on random nested specs agrees with JSON.stringify', () => {
  let seed = 7;
  const rnd = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  const value = (depth: number): unknown => {
    const t = rnd(depth > 2 ? 4 : 6);
    if (t === 0) return rnd(3);
    if (t === 1) return ['x', 'y', ''][rnd(3)];
    if (t === 2) return rnd(2) === 0 ? null : true;
    if (t === 3) return undefined;
    if (t === 4) return Array.from({ length: rnd(3) }, () => value(depth + 1));
    return Object.fromEntries(
      Array.from({ length: rnd(3) }, () => [['a', 'b', 'c'][rnd(3)], value(depth + 1)]),
    );
  };
  for (let i = 0; i < 5000; i++) {
    const a = value(0);
    const b = rnd(3) === 0 ? copyJson(a) : value(0);
    assert.equal(
      sameJson(a, b),
      JSON.stringify(a) === JSON.stringify(b),
      `${JSON.stringify(a)} vs ${JSON.stringify(b)}`,
    );
  }
});

test('copyJson copies every object and array, so changing the copy leaves the original as it was', () => {
  const original = { metadata: { name: 'n', labels: { a: 'b' } }, spec: { list: [{ x: 1 }, [2]], n: null } };
  const copy = copyJson(original);
  assert.deepEqual(copy, original);
  copy.metadata.labels.a = 'changed';
  (copy.spec.list[0] as { x: number }).x = 2;
  (copy.spec.list[1] as number[]).push(3);
  assert.deepEqual(original, {
    metadata: { name: 'n', labels: { a: 'b' } },
    spec: { list: [{ x: 1 }, [2]], n: null },
  });
  assert.deepEqual(
    copyJson(JSON.parse('{"__proto__": {"polluted": true}}')),
    JSON.parse('{"__proto__": {"polluted": true}}'),
  );
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});

test('copyShallow answers as spreading the object: the same own keys in the same order, values shared', () => {
  const inner = { a: 1 };
  const values: unknown[] = [
    undefined,
    null,
    {},
    { b: 1, a: inner, u: undefined, n: null },
    JSON.parse('{"x":1,"__proto__":{"polluted":true},"y":[1]}'),
    ...cases.filter((c) => c !== null && typeof c === 'object'),
  ];
  for (const v of values) {
    const spread = { ...(v as object) };
    const copy = copyShallow(v);
    assert.deepEqual(Reflect.ownKeys(copy), Reflect.ownKeys(spread));
    for (const k of Object.keys(spread)) assert.equal(copy[k], (spread as Record<string, unknown>)[k]);
    assert.equal(Object.getPrototypeOf(copy), Object.prototype);
    // Adding to the copy leaves the source alone, as with a spread.
    copy.added = 1;
    assert.equal((v as Record<string, unknown> | null)?.added, undefined);
  }
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});
