// The piece of a followed task log that needs no sandbox: the kept sections of attempts already streamed live are
// dropped, so each attempt's output is written once (the stream's framing: sandbox-api/client.test.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { withoutSections } from './job-log-follow.js';

describe('following a task log', () => {
  it('drops the kept sections of attempts streamed live, keeping the others', () => {
    const kept = '--- attempt 1 ---\nfirst\n--- attempt 2 ---\nsecond\n--- attempt 3 ---\nthird\n';
    assert.equal(withoutSections(kept, new Set([1, 3])), '--- attempt 2 ---\nsecond\n');
    assert.equal(withoutSections(kept, new Set()), kept);
  });
});
