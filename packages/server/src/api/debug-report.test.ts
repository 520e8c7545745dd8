// The one line of `berth debug`: each rule, from what the route gathered, most decisive first.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type DebugInstance, likelyCause } from './debug-report.js';

const MB = 1024 * 1024;
const running = (over: Partial<DebugInstance> = {}): DebugInstance => ({
  id: 'default.box',
  role: 'sandbox',
  state: 'running',
  memory: { usedBytes: 10 * MB, limitBytes: 256 * MB, peakBytes: 12 * MB, oomKills: 0 },
  pids: { current: 5, max: 64 },
  disk: { usedBytes: 0, limitBytes: 256 * MB },
  daemon: { answered: true, version: '0.1.0', uptimeSeconds: 5, runningProcesses: 0, keepAliveProcesses: 0 },
  daemonLog: [],
  ...over,
});
const report = (over: Record<string, unknown> = {}) => ({
  kind: 'Sandbox',
  name: 'box',
  workspace: 'default',
  status: 'DEPLOYED',
  state: 'RUNNING',
  events: [{ message: 'deployed: sandbox running', status: 'DEPLOYED', time: '2026-01-01T00:00:00Z' }],
  instances: [running()],
  ...over,
});

test('a healthy running sandbox: nothing looks wrong, with its memory', () => {
  assert.equal(
    likelyCause(report()),
    'nothing looks wrong: running, its daemon answers, memory 10 MB of 256 MB',
  );
});

test('FAILED names the failure event, its first sentence', () => {
  const events = [
    {
      message: 'out of memory: the sandbox used all of its 256 MB. Its processes and files are gone.',
      status: 'FAILED',
    },
  ];
  assert.equal(
    likelyCause(report({ status: 'FAILED', events, instances: [] })),
    'sandbox FAILED: out of memory: the sandbox used all of its 256 MB',
  );
});

test('an instance that ended: by the out-of-memory killer, or its daemon with its last output', () => {
  const oom = running({
    state: 'dead',
    memory: { usedBytes: 0, limitBytes: 256 * MB, peakBytes: 0, oomKills: 2 },
  });
  assert.equal(
    likelyCause(report({ instances: [oom] })),
    'the sandbox ended: the out-of-memory killer ended its processes (256 MB limit)',
  );
  const died = running({ state: 'dead', memory: undefined, daemonLog: ['Error: boom'] });
  assert.equal(
    likelyCause(report({ instances: [died] })),
    'the sandbox ended: its API daemon and every process stopped (last output: Error: boom)',
  );
  assert.match(
    likelyCause(report({ instances: [running({ state: 'gone' })] })),
    /^the runtime has no sandbox/,
  );
});

test('a daemon that does not answer, memory, disk and tasks near their limits', () => {
  assert.equal(
    likelyCause(report({ instances: [running({ daemon: { answered: false, error: 'ECONNREFUSED' } })] })),
    'the sandbox: its API daemon does not answer (ECONNREFUSED)',
  );
  const full = running({
    memory: { usedBytes: 240 * MB, limitBytes: 256 * MB, peakBytes: 250 * MB, oomKills: 0 },
    disk: { usedBytes: 200 * MB, limitBytes: 256 * MB },
  });
  assert.equal(
    likelyCause(report({ instances: [full] })),
    'the sandbox is nearly out of memory: 240 MB of 256 MB, 200 MB of it files; the next allocation may end a process',
  );
  assert.match(
    likelyCause(report({ instances: [running({ pids: { current: 60, max: 64 } })] })),
    /near its process limit \(60 of 64 tasks\)/,
  );
});

test("a replica's app that ended is named with its exit and last output", () => {
  const r = running({
    id: 'wl-1',
    role: 'replica',
    app: { status: 'failed', exitCode: 3, lastOutput: ['Traceback', 'KeyError: x'] },
  });
  assert.equal(
    likelyCause(report({ kind: 'Agent', state: undefined, instances: [r] })),
    'replica wl-1: its app ended (failed, exit code 3); last output: KeyError: x',
  );
});

test('the most recent fault is named: a daemon that died after the egress proxy was down and back', () => {
  const events = [
    { message: 'deployed: sandbox running', status: 'DEPLOYED', time: 'T0' },
    { message: 'egress proxy down: the process that carries … was killed (SIGKILL)', time: 'T1' },
    { message: 'egress proxy back after 210 ms: outbound connections work again', time: 'T2' },
    {
      message:
        "the sandbox had stopped: its API daemon ended and every process in it with it (the daemon's last output: nothing after it started); starting it again, fresh",
      status: 'DEPLOYING',
      time: 'T3',
    },
    { message: 'deployed: sandbox running', status: 'DEPLOYED', time: 'T4' },
  ];
  assert.match(
    likelyCause(report({ events })),
    /^recently: the sandbox had stopped: its API daemon ended.* \(T3\)$/,
  );
  const disk = [...events, { message: "disk full: the sandbox's files fill its 256 MB", time: 'T5' }];
  assert.match(likelyCause(report({ events: disk })), /^recently: disk full: .* \(T5\)$/);
});

test('a proxy down, then recent fault events, then standby', () => {
  const network = { proxy: 'down since 2026-01-01T00:00:01Z', egress: 'direct' };
  assert.match(likelyCause(report({ network })), /^the egress proxy is down since/);
  const events = [
    { message: 'deployed', status: 'DEPLOYED' },
    { message: 'out of memory: the kernel ended a process in the sandbox. The sandbox runs on', time: 'T1' },
    { message: 'created', status: 'DEPLOYED' },
  ];
  assert.equal(
    likelyCause(report({ events })),
    'recently: out of memory: the kernel ended a process in the sandbox (T1)',
  );
  assert.equal(
    likelyCause(report({ instances: [running({ state: 'frozen' })], state: 'STANDBY' })),
    'nothing looks wrong: in standby (frozen); the next request wakes it',
  );
  assert.equal(
    likelyCause(
      report({
        kind: 'Model',
        instances: [],
        state: undefined,
        events: [
          {
            message:
              'provider unreachable: cannot reach the provider of integration connection c (ECONNREFUSED); the call was answered 502',
            time: 'T2',
          },
        ],
      }),
    ),
    'recently: provider unreachable: cannot reach the provider of integration connection c (ECONNREFUSED); the call was answered 502 (T2)',
  );
});
