import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { closest, editDistance, knownFieldsAt, unknownFieldIssues } from './field-suggestions.js';
import { schemasOf } from './schema.js';
import { sandbox } from './sandbox.js';

describe('field suggestions', () => {
  it('counts a swap of two neighbours as one edit', () => {
    assert.equal(editDistance('memroy', 'memory'), 1);
    assert.equal(editDistance('ttl', 'ttl'), 0);
    assert.equal(editDistance('', 'abc'), 3);
    assert.equal(editDistance('image', 'imgae'), 1);
  });

  it('suggests only an obvious, unique slip', () => {
    assert.equal(closest('memroy', ['envs', 'memory', 'ttl']), 'memory');
    assert.equal(closest('Memory', ['memory']), 'memory');
    assert.equal(closest('colour', ['name', 'labels']), undefined);
    assert.equal(closest('ab', ['ac', 'ad']), undefined, 'a tie names neither');
  });

  it('finds the fields at the level of a pointer, through arrays and unions', () => {
    const input = schemasOf(sandbox).input;
    assert.ok(knownFieldsAt(input, '/spec/runtime/memroy')?.includes('memory'));
    assert.ok(knownFieldsAt(input, '/spec/runtime/ports/0/tagret')?.includes('target'));
    assert.ok(knownFieldsAt(input, '/spec/network/proxy/routing/0/headrs')?.includes('headers'));
    assert.deepEqual(unknownFieldIssues(input, ['/spec/runtime/imgae', '/spec/nope']), [
      {
        pointer: '/spec/runtime/imgae',
        message: 'is not a known field and was ignored; did you mean "image"?',
      },
      { pointer: '/spec/nope', message: 'is not a known field and was ignored' },
    ]);
  });
});
