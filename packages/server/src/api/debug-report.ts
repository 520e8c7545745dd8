// What `GET /v0/<kind>/{name}/debug` answers (the schema, for the OpenAPI document and the CLI) and the one line
// naming the most likely cause, decided from what was gathered: pure, so each rule is tested on its own.
import type { Static } from '@sinclair/typebox';
import { Type } from '../kinds/typebox.js';
import type { KindDescriptor } from '../kinds/types.js';
import type { ExtraPaths } from './openapi-extra.js';

const opt = Type.Optional;
const Str = Type.String;
const Int = Type.Integer;

export const DebugInstance = Type.Object(
  {
    id: Str({ description: "the runtime's name of the instance" }),
    role: Type.Union([Type.Literal('sandbox'), Type.Literal('replica')]),
    state: Type.Union(
      [Type.Literal('running'), Type.Literal('frozen'), Type.Literal('dead'), Type.Literal('gone')],
      {
        description:
          'running; frozen (standby); dead (its processes ended, not yet cleaned up); gone (the runtime has none)',
      },
    ),
    createdAt: opt(Str()),
    address: opt(Str({ description: 'its private address (reachable from the host only)' })),
    memory: opt(
      Type.Object({
        usedBytes: Type.Number(),
        limitBytes: Type.Number(),
        peakBytes: Type.Number(),
        oomKills: Int({ description: 'processes the out-of-memory killer ended, over its life' }),
      }),
    ),
    pids: opt(Type.Object({ current: Int(), max: Type.Number() })),
    disk: opt(
      Type.Object(
        { usedBytes: Type.Number(), limitBytes: Type.Number() },
        { description: 'its writable layer (/home/user, /tmp, /workspace, /var), held in memory' },
      ),
    ),
    daemon: Type.Object(
      {
        answered: Type.Boolean({
          description: 'its API daemon answered /health (a frozen one is not asked)',
        }),
        version: opt(Str()),
        uptimeSeconds: opt(Type.Number()),
        runningProcesses: opt(Int()),
        keepAliveProcesses: opt(Int()),
        error: opt(Str({ description: 'why it did not answer' })),
      },
      { description: "the sandbox's API daemon" },
    ),
    daemonLog: Type.Array(Str(), { description: 'the last lines the daemon wrote (its stdout and stderr)' }),
    app: opt(
      Type.Object(
        {
          status: Str(),
          exitCode: Int(),
          lastOutput: Type.Array(Str()),
        },
        { description: "a replica's app (its start command), as its daemon has it" },
      ),
    ),
  },
  { $id: 'DebugInstance' },
);
export type DebugInstance = Static<typeof DebugInstance>;

export const DebugNetwork = Type.Object(
  {
    allowedDomains: opt(Type.Array(Str())),
    forbiddenDomains: opt(Type.Array(Str())),
    egress: opt(Str({ description: 'direct, or gateway <name>' })),
    proxy: Str({
      description:
        'the egress proxy as its last event has it: not used (no policy), running, or down since <time>',
    }),
  },
  { $id: 'DebugNetwork', description: 'the egress policy in force (its routing secrets never shown)' },
);
export type DebugNetwork = Static<typeof DebugNetwork>;

export const DebugEvent = Type.Object(
  { message: Str(), time: opt(Str()), status: opt(Str()), type: opt(Str()) },
  { additionalProperties: true },
);

export const DebugReport = Type.Object(
  {
    kind: Str(),
    name: Str(),
    workspace: Str(),
    status: opt(Str()),
    state: opt(Str({ description: 'run state (RUNNING, STANDBY) where the kind has one' })),
    cause: Str({
      description: 'the most likely cause of trouble, in one line (or that nothing looks wrong)',
    }),
    events: Type.Array(DebugEvent, { description: 'the most recent events, oldest first' }),
    instances: Type.Array(DebugInstance),
    network: opt(DebugNetwork),
    tookMs: Type.Number({ description: 'how long gathering took' }),
  },
  { $id: 'Debug' },
);
export type DebugReport = Static<typeof DebugReport>;
type DebugEventT = Static<typeof DebugEvent>;

/** Shares of a limit past which a figure is named as the likely cause. */
export const NEARLY_FULL = 0.9;

const mb = (bytes: number) => `${Math.round(bytes / (1024 * 1024))} MB`;
/** Up to the first full stop that ends a sentence (`e.g. x` goes on). */
const firstSentence = (s: string) => {
  const cut = s.search(/\.\s+(?=[A-Z])/);
  return cut > 0 ? s.slice(0, cut) : s;
};

/**
 * Events that say a fault happened (controllers/sandbox/sandbox-faults.ts and its kin): out of memory, a full disk,
 * a daemon that died (the sandbox started again), a start cut short by a server stopping, a crashed replica, an
 * unreachable provider, the egress proxy down.
 */
const FAULT_EVENT =
  /^(out of memory|disk full|the sandbox had stopped|the sandbox's start was cut short|replica \S+ crashed|provider unreachable|egress proxy down)/;

/** The one line: the first rule that matches, most decisive first. */
export function likelyCause(r: Omit<DebugReport, 'cause' | 'tookMs'>): string {
  const events: DebugEventT[] = r.events;
  const last = events.at(-1)?.message;
  const noun = r.kind.replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase();
  if (r.status === 'FAILED')
    return `${noun} FAILED: ${firstSentence([...events].reverse().find((e) => e.status === 'FAILED')?.message ?? last ?? 'no event says why')}`;
  if (r.status === 'DELETING' || r.status === 'TERMINATED') return `${noun} is being deleted (${r.status})`;
  if (r.status === 'DEACTIVATED' || r.status === 'DEACTIVATING')
    return `${noun} is disabled (spec.enabled: false)`;
  const proxyDown = r.network?.proxy.startsWith('down');
  for (const i of r.instances) {
    const what = i.role === 'replica' ? `replica ${i.id}` : `the ${noun}`;
    if (i.state === 'gone' && r.status === 'DEPLOYED')
      return `the runtime has no ${noun} running for it: it is started again at its next request or check`;
    if (i.state === 'dead')
      return i.memory?.oomKills
        ? `${what} ended: the out-of-memory killer ended its processes (${mb(i.memory.limitBytes)} limit)`
        : `${what} ended: its API daemon and every process stopped${i.daemonLog.length ? ` (last output: ${i.daemonLog.at(-1)})` : ''}`;
    if (i.app && i.app.status !== 'running')
      return `${what}: its app ended (${i.app.status}, exit code ${i.app.exitCode})${i.app.lastOutput.length ? `; last output: ${i.app.lastOutput.at(-1)}` : ''}`;
    if (i.state === 'running' && !i.daemon.answered)
      return `${what}: its API daemon does not answer (${i.daemon.error ?? 'no answer'})`;
    if (i.memory && i.memory.usedBytes >= i.memory.limitBytes * NEARLY_FULL)
      return `${what} is nearly out of memory: ${mb(i.memory.usedBytes)} of ${mb(i.memory.limitBytes)}${i.disk && i.disk.usedBytes >= 1024 * 1024 ? `, ${mb(i.disk.usedBytes)} of it files` : ''}; the next allocation may end a process`;
    if (i.disk && i.disk.usedBytes >= i.disk.limitBytes * NEARLY_FULL)
      return `${what}'s files nearly fill its ${mb(i.disk.limitBytes)} (${mb(i.disk.usedBytes)} used)`;
    if (i.pids && i.pids.current >= i.pids.max * NEARLY_FULL)
      return `${what} is near its process limit (${i.pids.current} of ${i.pids.max} tasks): new processes and threads fail`;
  }
  if (proxyDown)
    return `the egress proxy is ${r.network?.proxy}: outbound connections under its network policy fail`;
  // The most recent fault, whatever its kind: a daemon that died after the proxy was down is the news.
  const recent = [...events].reverse().find((e) => FAULT_EVENT.test(e.message));
  if (recent) return `recently: ${firstSentence(recent.message)}${recent.time ? ` (${recent.time})` : ''}`;
  if (r.status && r.status !== 'DEPLOYED')
    return `${noun} is ${r.status}${last ? `: ${firstSentence(last)}` : ''}`;
  const frozen = r.instances.some((i) => i.state === 'frozen');
  if (frozen) return `nothing looks wrong: in standby (frozen); the next request wakes it`;
  const i = r.instances[0];
  if (i?.memory)
    return `nothing looks wrong: running, its daemon answers, memory ${mb(i.memory.usedBytes)} of ${mb(i.memory.limitBytes)}`;
  if (!r.instances.length && (r.kind === 'Agent' || r.kind === 'Function'))
    return 'nothing looks wrong: no replica runs now (one starts on the next request)';
  return 'nothing looks wrong';
}

/** The kinds that have a status, hence something to diagnose. */
export const debuggable = (kinds: KindDescriptor[]) => kinds.filter((k) => k.hasStatus);

/** The document's side of the routes (openapi.ts adds them beside the others). */
export function debugPaths(kinds: KindDescriptor[]): ExtraPaths {
  const out: ExtraPaths = {};
  for (const kd of debuggable(kinds))
    out[`${kd.path}/{${kd.nameParam}}/debug`] = {
      get: {
        operationId: `debug${kd.kind}`,
        summary: `What is wrong with ${/^[AEIOU]/.test(kd.kind) ? 'an' : 'a'} ${kd.kind.toLowerCase()}: status, recent events, its runtime instances against their limits, its daemon, the most likely cause`,
        tag: kd.kind,
        requiresKind: kd.kind,
        response: DebugReport,
      },
    };
  return out;
}
