// The pieces of a followed task log that need no sandbox: the daemon's stream framing undone across any chunking,
// and the kept sections of attempts already streamed live dropped, so each attempt's output is written once.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Unframer, withoutSections } from './job-log-follow.js';

describe('following a task log', () => {
  it('removes stdout:/stderr: prefixes and keepalives however the stream is cut', () => {
    const framed = 'stdout:one\n[keepalive]\nstderr:two\nstdout:par';
    const rest = 'tial line\nstdout:last\n';
    const whole = `${framed}${rest}`;
    for (let cut = 0; cut <= whole.length; cut++) {
      const u = new Unframer();
      const out = u.push(whole.slice(0, cut)) + u.push(whole.slice(cut)) + u.end();
      assert.equal(out, 'one\ntwo\npartial line\nlast\n', `cut at ${cut}`);
    }
  });

  it('drops the kept sections of attempts streamed live, keeping the others', () => {
    const kept = '--- attempt 1 ---\nfirst\n--- attempt 2 ---\nsecond\n--- attempt 3 ---\nthird\n';
    assert.equal(withoutSections(kept, new Set([1, 3])), '--- attempt 2 ---\nsecond\n');
    assert.equal(withoutSections(kept, new Set()), kept);
  });
});
