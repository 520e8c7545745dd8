// The service's own SDK (@blaxel/core), unmodified, driving the daemon directly: the wire-compatibility check.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startSandboxDaemon, type TestDaemon } from '../test-support/sandbox-daemon.js';

process.env.BL_DISABLE_H2 = 'true';
const { SandboxInstance } = await import('@blaxel/core');

let d: TestDaemon;
let sbx: InstanceType<typeof SandboxInstance>;
before(async () => {
  d = await startSandboxDaemon();
  sbx = await SandboxInstance.fromSession({
    name: 'sdk',
    url: d.url,
    token: 'unused',
    expiresAt: new Date(),
  });
});
after(() => d.close());

describe('@blaxel/core against the daemon', () => {
  test('process.exec waits for completion and returns the output', async () => {
    const p = await sbx.process.exec({ command: 'echo from-sdk', waitForCompletion: true });
    assert.equal(p.stdout, 'from-sdk\n');
    assert.equal(p.exitCode, 0);
  });

  test('process.exec with onLog streams the output lines', async () => {
    const lines: string[] = [];
    const p = await sbx.process.exec({
      command: 'echo l1; echo l2 >&2',
      waitForCompletion: true,
      onLog: (l: string) => lines.push(l),
    });
    assert.equal(p.status, 'completed');
    assert.deepEqual(lines.join('').replace(/\n/g, ''), 'l1l2');
  });

  test('process.streamLogs, logs, wait and kill', async () => {
    const p = await sbx.process.exec({
      command: "printf 'x\\n'; sleep 0.2; printf 'y\\n'",
      name: 'sdk-logs',
    });
    const seen: string[] = [];
    const stream = sbx.process.streamLogs('sdk-logs', { onStdout: (l: string) => seen.push(l) });
    await stream.wait();
    assert.deepEqual(seen, ['x', 'y']);
    const done = await sbx.process.wait(p.pid, { interval: 50 });
    assert.equal(done.status, 'completed');
    assert.equal(await sbx.process.logs('sdk-logs', 'stdout'), 'x\ny\n');
    const sleeper = await sbx.process.exec({ command: 'sleep 30' });
    await sbx.process.kill(sleeper.pid);
    const killed = await sbx.process.wait(sleeper.pid, { interval: 50 });
    assert.equal(killed.status, 'killed');
  });

  test('fs.write, read, ls, mkdir and rm', async () => {
    await sbx.fs.write(`${d.root}/sdk/hello.txt`, 'hello sdk');
    assert.equal(await sbx.fs.read(`${d.root}/sdk/hello.txt`), 'hello sdk');
    await sbx.fs.mkdir(`${d.root}/sdk/dir`);
    const ls = await sbx.fs.ls(`${d.root}/sdk`);
    assert.deepEqual(
      ls.files.map((f: { name: string }) => f.name),
      ['hello.txt'],
    );
    assert.deepEqual(
      ls.subdirectories.map((s: { name: string }) => s.name),
      ['dir'],
    );
    await sbx.fs.rm(`${d.root}/sdk`, true);
    await assert.rejects(sbx.fs.ls(`${d.root}/sdk`));
  });

  test('fs.writeBinary and readBinary round-trip bytes; a large write goes through multipart upload', async () => {
    const small = randomBytes(4096);
    await sbx.fs.writeBinary(`${d.root}/bin/small.bin`, small);
    const back = Buffer.from(await (await sbx.fs.readBinary(`${d.root}/bin/small.bin`)).arrayBuffer());
    assert.deepEqual(back, small);
    const big = randomBytes(11 * 1024 * 1024);
    await sbx.fs.writeBinary(`${d.root}/bin/big.bin`, big);
    assert.deepEqual(readFileSync(join(d.root, 'bin', 'big.bin')), big);
  });

  test('fs.writeTree, find and grep', async () => {
    await sbx.fs.writeTree(
      [
        { path: 'a.ts', content: 'const needle = 1;' },
        { path: 'lib/b.ts', content: 'nothing here' },
      ],
      `${d.root}/tree`,
    );
    const found = await sbx.fs.find(`${d.root}/tree`, { patterns: ['*.ts'] });
    assert.deepEqual(found.matches.map((m: { path: string }) => m.path).sort(), ['a.ts', 'lib/b.ts']);
    const grep = await sbx.fs.grep('needle', `${d.root}/tree`);
    assert.equal(grep.total, 1);
    assert.equal(grep.matches[0].path, 'a.ts');
  });

  test('fs.watch reports a created file', async () => {
    await sbx.fs.mkdir(`${d.root}/watched`);
    const events: { op: string; name: string }[] = [];
    let resolve: () => void = () => {};
    const got = new Promise<void>((r) => {
      resolve = r;
    });
    const handle = sbx.fs.watch(`${d.root}/watched`, (e: { op: string; name: string }) => {
      events.push(e);
      if (e.name === 'new.txt') resolve();
    });
    // The watch is armed when the daemon answers; keep writing until the event shows.
    const writer = setInterval(() => writeFileSync(join(d.root, 'watched', 'new.txt'), 'x'), 50);
    await got;
    clearInterval(writer);
    handle.close();
    assert.ok(events.some((e) => e.name === 'new.txt' && (e.op === 'CREATE' || e.op === 'WRITE')));
  });
});
