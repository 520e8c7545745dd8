// The log stream's framing taken apart again, whatever the chunk boundaries (no sandbox needed).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LogDemuxer } from './sandbox-logs.js';

function demux(chunks: string[]) {
  const out = { stdout: '', stderr: '' };
  const d = new LogDemuxer((stream, text) => {
    out[stream] += text;
  });
  for (const c of chunks) d.push(c);
  d.end();
  return out;
}

const STREAM = 'stdout:one\n[keepalive]\nstderr:oops\nstdout:par';
const REST = 'tial line\nstdout:stdout:literal\n';

describe('sandbox logs stream', () => {
  it('sends each prefixed line to its stream and drops keepalives', () => {
    assert.deepEqual(demux([STREAM, REST]), {
      stdout: 'one\npartial line\nstdout:literal\n',
      stderr: 'oops\n',
    });
  });

  it('gives the same result when chunks split prefixes and keepalives anywhere', () => {
    const whole = STREAM + REST;
    for (let i = 1; i < whole.length; i++)
      assert.deepEqual(demux([whole.slice(0, i), whole.slice(i)]), demux([whole]), `split at ${i}`);
    assert.deepEqual(demux([...whole]), demux([whole]), 'one character at a time');
  });

  it('keeps a last line without a newline', () => {
    assert.deepEqual(demux(['stderr:no newline']), { stdout: '', stderr: 'no newline' });
  });
});
