import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startSandboxDaemon, type TestDaemon } from '../test-support/sandbox-daemon.js';
import type { ProcessJson } from './schema.js';

let d: TestDaemon;
before(async () => {
  d = await startSandboxDaemon();
});
after(() => d.close());

async function exec(body: Record<string, unknown>): Promise<ProcessJson> {
  const res = await d.fetch('/process', { method: 'POST', json: body });
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as ProcessJson;
}

async function until(id: string, pred: (p: ProcessJson) => boolean): Promise<ProcessJson> {
  for (;;) {
    const p = (await (await d.fetch(`/process/${id}`)).json()) as ProcessJson;
    if (pred(p)) return p;
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('process exec', () => {
  test('a synchronous exec answers the finished process with its output', async () => {
    const p = await exec({ command: 'echo hi', waitForCompletion: true });
    assert.equal(p.stdout, 'hi\n');
    assert.equal(p.logs, 'hi\n');
    assert.equal(p.exitCode, 0);
    assert.equal(p.status, 'completed');
    assert.match(p.pid, /^\d+$/);
    assert.equal(p.workingDir, d.root);
    assert.notEqual(p.completedAt, '');
  });

  test('a shell command runs through /bin/sh and a failure keeps its exit code', async () => {
    const p = await exec({ command: 'echo out; echo err >&2; exit 3', waitForCompletion: true });
    assert.equal(p.stdout, 'out\n');
    assert.equal(p.stderr, 'err\n');
    assert.equal(p.exitCode, 3);
    assert.equal(p.status, 'failed');
  });

  test('an unknown program fails with the shell exit code 127', async () => {
    const p = await exec({ command: 'no-such-program-xyz --flag', waitForCompletion: true });
    assert.equal(p.exitCode, 127);
    assert.equal(p.status, 'failed');
    assert.match(p.stderr, /not found/);
  });

  test('env and workingDir reach the process', async () => {
    await d.fetch(`/filesystem/sub`, { method: 'PUT', json: { isDirectory: true } });
    const p = await exec({
      command: 'echo $GREETING; pwd',
      env: { GREETING: 'hey' },
      workingDir: 'sub',
      waitForCompletion: true,
    });
    assert.equal(p.stdout, `hey\n${d.root}/sub\n`);
  });

  test('Accept: text/event-stream streams NDJSON output lines and ends with the result', async () => {
    const res = await d.fetch('/process', {
      method: 'POST',
      headers: { accept: 'text/event-stream' },
      json: { command: 'echo out; sleep 0.1; echo err >&2', waitForCompletion: true },
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /application\/x-ndjson/);
    const lines = (await res.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      lines
        .filter((l) => l.type === 'stdout')
        .map((l) => l.data)
        .join(''),
      'out\n',
    );
    assert.deepEqual(
      lines
        .filter((l) => l.type === 'stderr')
        .map((l) => l.data)
        .join(''),
      'err\n',
    );
    const last = lines.at(-1);
    assert.equal(last.type, 'result');
    const result = JSON.parse(last.data) as ProcessJson;
    assert.equal(result.status, 'completed');
    assert.equal(result.stdout, 'out\n');
  });

  test('an invalid body is a 400 with an error message', async () => {
    const res = await d.fetch('/process', { method: 'POST', json: { command: 42 } });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { error: string }).error, /command/);
  });
});

describe('process management', () => {
  test('logs are kept per stream and the process is found by name', async () => {
    await exec({ command: 'echo one; echo two >&2', name: 'logs-test', waitForCompletion: true });
    const res = await d.fetch('/process/logs-test/logs');
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { logs: 'one\ntwo\n', stdout: 'one\n', stderr: 'two\n' });
    const byName = (await (await d.fetch('/process/logs-test')).json()) as ProcessJson;
    assert.equal(byName.name, 'logs-test');
    const list = (await (await d.fetch('/process')).json()) as ProcessJson[];
    assert.ok(list.some((p) => p.name === 'logs-test'));
  });

  test('the log stream replays, follows and prefixes each line, ending with the process', async () => {
    const p = await exec({
      command: "printf 'a\\n'; sleep 0.3; printf 'b\\n'; echo c >&2",
      name: 'streamer',
    });
    const res = await d.fetch(`/process/${p.pid}/logs/stream`);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'stdout:a\nstdout:b\nstderr:c\n');
  });

  test('a process the daemon starts is the first the kernel ends when memory runs out (oom_score_adj 1000)', async () => {
    const p = await exec({ command: 'sleep 30' });
    try {
      assert.equal(readFileSync(`/proc/${p.pid}/oom_score_adj`, 'utf8').trim(), '1000');
    } finally {
      await d.fetch(`/process/${p.pid}/kill`, { method: 'DELETE' });
    }
  });

  test('kill ends a running process with status killed', async () => {
    const p = await exec({ command: 'sleep 30' });
    assert.equal(p.status, 'running');
    const res = await d.fetch(`/process/${p.pid}/kill`, { method: 'DELETE' });
    assert.equal(res.status, 200);
    const done = await until(p.pid, (x) => x.status !== 'running');
    assert.equal(done.status, 'killed');
  });

  test('stop ends a running process (and its children) with status stopped', async () => {
    const p = await exec({ command: 'sleep 30 & sleep 31; wait', name: 'stopper' });
    assert.equal((await d.fetch('/process/stopper', { method: 'DELETE' })).status, 200);
    const done = await until(p.pid, (x) => x.status !== 'running');
    assert.equal(done.status, 'stopped');
  });

  test('stdin: bytes written reach the process, closing it ends the input', async () => {
    const p = await exec({ command: 'cat', stdin: true, name: 'cat-stdin' });
    const w = await d.fetch('/process/cat-stdin/stdin', { method: 'POST', body: 'hello\n' });
    assert.equal(w.status, 200);
    assert.equal((await d.fetch('/process/cat-stdin/stdin', { method: 'DELETE' })).status, 200);
    const done = await until(p.pid, (x) => x.status !== 'running');
    assert.equal(done.stdout, 'hello\n');
    assert.equal(done.status, 'completed');
  });

  test('a process without stdin refuses stdin writes with 409', async () => {
    const p = await exec({ command: 'sleep 5' });
    const res = await d.fetch(`/process/${p.pid}/stdin`, { method: 'POST', body: 'x' });
    assert.equal(res.status, 409);
    await d.fetch(`/process/${p.pid}/kill`, { method: 'DELETE' });
  });

  test('a name used by a running process is a 409; an unknown process is a 404', async () => {
    await exec({ command: 'sleep 5', name: 'unique' });
    const res = await d.fetch('/process', { method: 'POST', json: { command: 'true', name: 'unique' } });
    assert.equal(res.status, 409);
    await d.fetch('/process/unique/kill', { method: 'DELETE' });
    assert.equal((await d.fetch('/process/does-not-exist')).status, 404);
  });

  test('restartOnFailure restarts up to maxRestarts, then reports the failure', async () => {
    const p = await exec({
      command: 'exit 4',
      restartOnFailure: true,
      maxRestarts: 2,
      waitForCompletion: true,
    });
    assert.equal(p.restartCount, 2);
    assert.equal(p.status, 'failed');
    assert.equal(p.exitCode, 4);
  });

  test('timeout kills a process that runs too long', async () => {
    const p = await exec({ command: 'sleep 30', timeout: 1, waitForCompletion: true });
    assert.equal(p.status, 'killed');
  });

  test('a running keepAlive process shows in /health until it ends', async () => {
    const p = await exec({ command: 'sleep 30', keepAlive: true });
    assert.equal(p.keepAlive, true);
    const h1 = (await (await d.fetch('/health')).json()) as {
      activeKeepAlive: number;
      runningProcesses: number;
    };
    assert.equal(h1.activeKeepAlive, 1);
    assert.ok(h1.runningProcesses >= 1);
    await d.fetch(`/process/${p.pid}/kill`, { method: 'DELETE' });
    await until(p.pid, (x) => x.status !== 'running');
    const h2 = (await (await d.fetch('/health')).json()) as { activeKeepAlive: number };
    assert.equal(h2.activeKeepAlive, 0);
  });

  test('waitForPorts answers once the port listens, and the ports route names it', async () => {
    const port = await freePort();
    const server = `require('http').createServer((q,s)=>s.end('ok')).listen(${port},'127.0.0.1')`;
    const p = await exec({ command: `${process.execPath} -e "${server}"`, waitForPorts: [port] });
    assert.equal(p.status, 'running');
    const ports = (await (await d.fetch(`/network/process/${p.pid}/ports`)).json()) as {
      ports: { localPort: number }[];
    };
    assert.ok(
      ports.ports.some((x) => x.localPort === port),
      JSON.stringify(ports),
    );
    const proxied = await d.fetch(`/port/${port}/`);
    assert.equal(await proxied.text(), 'ok');
    await d.fetch(`/process/${p.pid}/kill`, { method: 'DELETE' });
  });
});

test('exec round trip for `true` (measured, printed, not asserted)', async () => {
  const times: number[] = [];
  for (let i = 0; i < 220; i++) {
    const t0 = performance.now();
    const p = await exec({ command: 'true', waitForCompletion: true });
    if (i >= 20) times.push(performance.now() - t0);
    assert.equal(p.exitCode, 0);
  }
  times.sort((a, b) => a - b);
  const pct = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))].toFixed(2);
  console.log(`# exec RTT for \`true\` over ${times.length} calls: p50 ${pct(0.5)} ms, p99 ${pct(0.99)} ms`);
});

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}
