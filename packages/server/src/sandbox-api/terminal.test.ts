import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { startSandboxDaemon, type TestDaemon } from '../test-support/sandbox-daemon.js';

/** Opens a terminal, types `input`, and resolves with everything received until `until` appears. */
async function session(d: TestDaemon, steps: { send: string; until: RegExp }[], query = '') {
  const ws = new WebSocket(`${d.url.replace('http', 'ws')}/terminal/ws?cols=100&rows=30${query}`);
  let out = '';
  let exit: { exitCode: number } | undefined;
  let wake: () => void = () => {};
  ws.on('message', (data, isBinary) => {
    if (isBinary) out += data.toString();
    else exit = JSON.parse(data.toString());
    wake();
  });
  const closed = new Promise<number>((r) => ws.on('close', (code) => r(code)));
  await new Promise((r, j) => {
    ws.once('open', r);
    ws.once('error', j);
  });
  for (const step of steps) {
    ws.send(JSON.stringify({ type: 'input', data: step.send }));
    while (!step.until.test(out) && !exit) await new Promise<void>((r) => (wake = r));
  }
  return { out: () => out, exit: () => exit, ws, closed };
}

for (const mode of ['pty', 'script'] as const) {
  describe(`terminal over WebSocket (${mode})`, () => {
    let d: TestDaemon;
    before(async () => {
      d = await startSandboxDaemon(mode === 'script' ? { BERTH_SANDBOX_TERMINAL: 'script' } : {});
    });
    after(() => d.close());

    test('keystrokes run in a shell in the working directory and output comes back', async () => {
      const s = await session(d, [
        { send: 'echo "term-$((40+2))"; pwd\n', until: /term-42[\s\S]*berth-sbx-/ },
      ]);
      assert.match(s.out(), /term-42/);
      assert.ok(s.out().includes(d.root));
      s.ws.send(JSON.stringify({ type: 'resize', cols: 120, rows: 40 }));
      s.ws.send(JSON.stringify({ type: 'input', data: 'exit 3\n' }));
      assert.equal(await s.closed, 1000);
      assert.deepEqual(s.exit(), { type: 'exit', exitCode: 3 });
    });

    test('?command= runs that command on the terminal and ends with its exit code', async () => {
      const command = encodeURIComponent("test -t 1 && echo 'on a tty'; exit 7");
      const s = await session(d, [], `&command=${command}`);
      assert.equal(await s.closed, 1000);
      assert.match(s.out(), /on a tty/);
      assert.deepEqual(s.exit(), { type: 'exit', exitCode: 7 });
    });

    test('output written right before an exit arrives whole, before the exit', async () => {
      // 8,893 bytes, then the shell is gone at once: the end of it is still on its way through the PTY then.
      const command = encodeURIComponent('printf "%s" "$(seq 1 2000 | tr "\\n" " ")"; exit 5');
      for (let i = 0; i < 3; i++) {
        const s = await session(d, [], `&command=${command}`);
        assert.equal(await s.closed, 1000);
        assert.deepEqual(s.exit(), { type: 'exit', exitCode: 5 });
        const words = s.out().trim().split(/\s+/);
        assert.equal(
          words.length,
          2000,
          `run ${i}: ${s.out().length} bytes, ending ${JSON.stringify(s.out().slice(-20))}`,
        );
        assert.equal(words.at(-1), '2000');
      }
    });
  });
}
