// Byte-exact standby (decision 050): a sandbox whose process appends fsync'd records to a volume and keeps an
// in-memory counter goes to standby and is woken again and again by a real `berth serve` (killed with SIGKILL and
// started again every `killEvery` cycles), with requests sent as it freezes and as it thaws. Counted: cycles, wakes,
// requests, first calls after a wake that failed, bytes of the record file compared with what the process says it
// wrote, bytes lost, processes lost. Used by the test (a short run) and `npm run bench -- standby-cycles` (1,000).
import { createHash } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLinuxDriver, type LinuxDriver } from '../../src/runtime/index.js';
import { sandboxId } from '../../src/runtime/sandbox-id.js';
import { removeSandboxesIn, unmountVolumesIn } from '../../src/test-support/sandboxes.js';
import { serve, stopped } from '../serve-process.js';

/** Idle time before standby: short, so that a cycle costs about a tenth of a second. */
const STANDBY_AFTER_S = 0.05;
const PORT = 8000;
const NAME = 'cycler';
const RECORDS = '/data/records.log';

/**
 * The process in the sandbox: every 3 ms it appends record n+1 (its number and a hash of it, so a lost or torn byte
 * shows) and fsyncs it, then counts it in memory; it answers the count, its pid and a token drawn at its start.
 */
const WRITER = `
const fs = require('fs'), http = require('http'), crypto = require('crypto');
const token = crypto.randomBytes(8).toString('hex');
const fd = fs.openSync(${JSON.stringify(RECORDS)}, 'a');
let n = 0;
setInterval(() => {
  const line = 'record ' + (n + 1) + ' ' + crypto.createHash('sha256').update(String(n + 1)).digest('hex').slice(0, 16) + '\\n';
  fs.writeSync(fd, line); fs.fsyncSync(fd); n++;
}, 3);
http.createServer((q, s) => s.end(JSON.stringify({ n, pid: process.pid, token }))).listen(${PORT}, '127.0.0.1');
`;

/** Record i as the writer writes it. */
export const recordOf = (i: number) =>
  `record ${i} ${createHash('sha256').update(String(i)).digest('hex').slice(0, 16)}\n`;

export interface CycleReport {
  cycles: number;
  serverKills: number;
  requests: number;
  /** Requests sent as the sandbox was going to standby (within a few ms of its idle deadline). */
  duringFreeze: number;
  /** Requests sent a millisecond after the wake-up request, while it was being thawed. */
  duringThaw: number;
  firstCallFailures: number;
  otherFailures: number;
  bytesCompared: number;
  lostBytes: number;
  lostProcesses: number;
  /** What went wrong, one line each (empty when nothing did). */
  problems: string[];
}

export interface CycleOptions {
  cycles: number;
  killEvery: number;
  /** Bytes of the record file are compared every this many cycles (and at the end). */
  verifyEvery?: number;
  progress?: (cycle: number) => void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runStandbyCycles(opts: CycleOptions): Promise<CycleReport> {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-cycles-'));
  const env = { BERTH_STANDBY_AFTER: String(STANDBY_AFTER_S) };
  const r: CycleReport = {
    cycles: 0,
    serverKills: 0,
    requests: 0,
    duringFreeze: 0,
    duringThaw: 0,
    firstCallFailures: 0,
    otherFailures: 0,
    bytesCompared: 0,
    lostBytes: 0,
    lostProcesses: 0,
    problems: [],
  };
  let server: { child: ChildProcess; url: string } | undefined;
  let driver: LinuxDriver | undefined;
  try {
    server = await serve(dataDir, env);
    const key = readFileSync(join(dataDir, 'admin.key'), 'utf8').trim();
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const api = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${server!.url}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
      return text ? JSON.parse(text) : undefined;
    };
    await api('POST', '/v0/volumes', { metadata: { name: 'records' }, spec: { size: 64 } });
    await api('POST', '/v0/sandboxes', {
      metadata: { name: NAME },
      spec: { runtime: { memory: 256 }, volumes: [{ name: 'records', mountPath: '/data' }] },
    });
    const base = () => `${server!.url}/run/default/sandboxes/${NAME}`;
    await api(
      'PUT',
      `/run/default/sandboxes/${NAME}/filesystem/${encodeURIComponent('/home/user/writer.js')}`,
      {
        content: WRITER,
      },
    );
    await api('POST', `/run/default/sandboxes/${NAME}/process`, {
      name: 'writer',
      command: 'node /home/user/writer.js',
      waitForPorts: [PORT],
    });
    driver = await createLinuxDriver({ dataDir, netPoolSize: 0 });
    const id = sandboxId('default', NAME);
    /** One call to the writer's port through Berth: its answer, or the failure. */
    const call = async () => {
      r.requests++;
      try {
        const res = await fetch(`${base()}/port/${PORT}/`, { headers });
        const text = await res.text();
        if (res.status !== 200) return { error: `${res.status} ${text.slice(0, 200)}` };
        return { state: JSON.parse(text) as { n: number; pid: number; token: string } };
      } catch (err) {
        return { error: (err as Error).message };
      }
    };
    const first = await call();
    if (!first.state) throw new Error(`the writer does not answer: ${first.error}`);
    const process0 = first.state;
    let lastN = first.state.n;
    const check = (what: string, got: Awaited<ReturnType<typeof call>>, firstCall: boolean) => {
      if (!got.state) {
        if (firstCall) r.firstCallFailures++;
        else r.otherFailures++;
        r.problems.push(`cycle ${r.cycles}: ${what} failed: ${got.error}`);
        return;
      }
      if (got.state.token !== process0.token || got.state.pid !== process0.pid) {
        r.lostProcesses++;
        r.problems.push(
          `cycle ${r.cycles}: ${what} was answered by another process (${JSON.stringify(got.state)})`,
        );
      }
      if (got.state.n < lastN)
        r.problems.push(`cycle ${r.cycles}: the count went back from ${lastN} to ${got.state.n}`);
      lastN = Math.max(lastN, got.state.n);
    };
    const untilFrozen = async () => {
      for (let i = 0; i < 5000; i++) {
        if ((await driver!.inspect(id))?.state === 'frozen') return true;
        await sleep(2);
      }
      return false;
    };
    /** The record file, compared byte for byte with records 1..k, k at least what the writer had counted. */
    const verify = async () => {
      const counted = lastN;
      const res = await fetch(`${base()}/filesystem/${encodeURIComponent(RECORDS)}`, {
        headers: { ...headers, accept: 'application/octet-stream' },
      });
      if (res.status !== 200) {
        r.otherFailures++;
        r.problems.push(
          `cycle ${r.cycles}: reading the records answered ${res.status} ${(await res.text()).slice(0, 300)}`,
        );
        return;
      }
      const got = Buffer.from(await res.arrayBuffer());
      const lines = got.toString('utf8').split('\n');
      const whole = lines.length - 1; // the last element is what follows the last newline
      const expected = Buffer.from(Array.from({ length: whole }, (_, i) => recordOf(i + 1)).join(''));
      r.bytesCompared += got.length;
      const same = got.subarray(0, expected.length).equals(expected);
      if (!same || whole < counted) {
        let at = 0;
        while (at < expected.length && got[at] === expected[at]) at++;
        const missing = Math.max(0, counted - whole);
        r.lostBytes +=
          expected.length -
          at +
          Array.from({ length: missing }, (_, i) => recordOf(whole + i + 1)).join('').length;
        r.problems.push(
          `cycle ${r.cycles}: the records differ from byte ${at} (${whole} whole records, the writer had counted ${counted})`,
        );
      }
    };
    const jitter = () => STANDBY_AFTER_S * 1000 + (Math.random() * 20 - 10);
    for (let c = 1; c <= opts.cycles; c++) {
      r.cycles = c;
      // A request near the idle deadline: before, during or just after the freeze, whichever it meets.
      await sleep(jitter());
      r.duringFreeze++;
      check('a request as it froze', await call(), false);
      if (!(await untilFrozen())) {
        r.problems.push(`cycle ${c}: never went to standby`);
        continue;
      }
      // The wake-up: the first call, and another one a millisecond later, while the thaw is under way.
      const wake = call();
      await sleep(1);
      r.duringThaw++;
      const during = call();
      check('the first call after the wake-up', await wake, true);
      check('a call during the thaw', await during, false);
      if (c % (opts.verifyEvery ?? 50) === 0) await verify();
      if (c % opts.killEvery === 0 && c < opts.cycles) {
        await untilFrozen();
        server.child.kill('SIGKILL');
        await stopped(server.child);
        r.serverKills++;
        server = await serve(dataDir, env);
      }
      opts.progress?.(c);
    }
    await verify();
    const proc = await api('GET', `/run/default/sandboxes/${NAME}/process/writer`);
    if (proc.status !== 'running') {
      r.lostProcesses++;
      r.problems.push(`the writer is ${proc.status} at the end`);
    }
    return r;
  } finally {
    await driver?.close();
    if (server) {
      server.child.kill('SIGTERM');
      await stopped(server.child);
    }
    await removeSandboxesIn(dataDir);
    await unmountVolumesIn(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
  }
}
