import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isoTime } from './iso-time.js';

describe('isoTime', () => {
  it("answers Date#toISOString's text for each time, also times in the same millisecond and going back", () => {
    const times = [
      0, 1, 1, 999, 1000, -1, 1_764_200_000_123, 1_764_200_000_123, 1_764_200_000_124, 8.64e15, -8.64e15,
    ];
    for (const t of times) assert.equal(isoTime(new Date(t)), new Date(t).toISOString());
  });

  it('throws as toISOString does for an invalid date, twice in a row', () => {
    for (let i = 0; i < 2; i++) assert.throws(() => isoTime(new Date(Number.NaN)), RangeError);
  });
});
