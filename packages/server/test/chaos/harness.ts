// The chaos run and the soak (decision 050): the mixed load of load.ts against a real `berth serve` on loopback, for
// a bounded time; in the chaos run with faults injected at random (faults.ts) and the invariants checked afterwards
// (invariants.ts), in the soak without faults and with the server's resources sampled. Both end by removing
// everything and checking that nothing of the run is left on the host (host.ts).
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import { xoroshiro128plus } from 'pure-rand/generator/xoroshiro128plus';
import { startFakeProvider } from '../../src/test-support/fake-provider.js';
import { removeSandboxesIn, unmountVolumesIn } from '../../src/test-support/sandboxes.js';
import { OUTBOUND_LOOPBACK } from '../../src/test-support/server.js';
import { type Fault, FaultInjector, type FaultKind } from './faults.js';
import { HostTracker } from './host.js';
import { type Verdict, verify } from './invariants.js';
import {
  agentTraffic,
  jobRuns,
  type LoadContext,
  mcpSession,
  modelCalls,
  previewTraffic,
  sandboxChurn,
  volumeWriter,
} from './load.js';
import { ChaosServer } from './server.js';

/** The operator's scrape token of the run's server (it reads the server's own series too). */
const METRICS_TOKEN = 'chaos-metrics-token-0123456789';

export type LoadPart = 'sandboxes' | 'volume' | 'model' | 'mcp' | 'preview' | 'job' | 'agent';
export const ALL_PARTS: LoadPart[] = ['sandboxes', 'volume', 'model', 'mcp', 'preview', 'job', 'agent'];
export const ALL_FAULTS: FaultKind[] = [
  'server',
  'daemon',
  'replica',
  'task',
  'proxy',
  'fill-disk',
  'fill-memory',
];

export interface RunOptions {
  /** Seconds of load (set-up and checks come on top). */
  seconds: number;
  /** Seeds the faults' kinds, moments and targets and the agent's bursts (the load's own timing is the host's). */
  seed: number;
  parts: LoadPart[];
  /** Faults and their mean interval; none in a soak. */
  faults?: { kinds: FaultKind[]; everyMs: number };
  /** Soak: the server's resources every this many ms. */
  sampleEveryMs?: number;
  /** Churning sandbox loops at once. */
  churners?: number;
  settleMs?: number;
  log?: (line: string) => void;
}

export interface Sample {
  atS: number;
  rssMb: number;
  fds: number;
  timers?: number;
  storeMb: number;
  instances: number;
  hostAvailableMb: number;
}

export interface RunReport {
  seconds: number;
  seed: number;
  counts: Record<string, number>;
  faults: Fault[];
  serverKills: number;
  verdict?: Verdict;
  leftovers: string[];
  samples: Sample[];
  /** Set-up failures: a part could not start, so the run says nothing of it. */
  problems: string[];
}

/** Lines of the server's /proc status (VmRSS) and its descriptors. */
function processFigures(pid: number) {
  const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
  return { rssMb: rss, fds: readdirSync(`/proc/${pid}/fd`).length };
}

const fileMb = (p: string) => {
  try {
    return statSync(p).size / 2 ** 20;
  } catch {
    return 0;
  }
};

const instancesIn = (dataDir: string) => {
  const dir = join(dataDir, 'sandboxes');
  return existsSync(dir) ? readdirSync(dir).length : 0;
};

export async function runLoad(opts: RunOptions): Promise<RunReport> {
  const log = opts.log ?? (() => undefined);
  const fake = await startFakeProvider({ key: 'sk-chaos' });
  const s = new ChaosServer({
    ...OUTBOUND_LOOPBACK,
    BERTH_STANDBY_AFTER: '2',
    BERTH_REPLICA_REMOVE_AFTER: '3',
    BERTH_FAULT_CHECK_EVERY: '0.5',
    BERTH_METRICS_TOKEN: METRICS_TOKEN,
  });
  const host = new HostTracker(s.dataDir);
  const report: RunReport = {
    seconds: opts.seconds,
    seed: opts.seed,
    counts: {},
    faults: [],
    serverKills: 0,
    leftovers: [],
    samples: [],
    problems: [],
  };
  let stopAt = Number.POSITIVE_INFINITY;
  const ctx: LoadContext = {
    s,
    fake,
    running: () => Date.now() < stopAt,
    rng: (
      (g) => () =>
        uniformFloat64(g)
    )(xoroshiro128plus(opts.seed)),
    acked: {
      sandboxesCreated: new Set(),
      sandboxesDeleted: new Set(),
      sandboxesDeleteUnknown: new Set(),
      volumeRecords: [],
      executions: [],
    },
    startedAt: Date.now(),
    counts: report.counts,
    problems: report.problems,
  };
  try {
    await s.start();
    host.start();
    const parts: Record<LoadPart, () => Promise<void>> = {
      sandboxes: async () => {
        await Promise.all(Array.from({ length: opts.churners ?? 2 }, (_, i) => sandboxChurn(ctx, i)));
      },
      volume: () => volumeWriter(ctx),
      model: () => modelCalls(ctx),
      mcp: () => mcpSession(ctx),
      preview: () => previewTraffic(ctx),
      job: () => jobRuns(ctx),
      agent: () => agentTraffic(ctx),
    };
    // The load's clock starts once every part is set up (a build takes a while); until then, parts run freely.
    const started = Date.now();
    stopAt = started + opts.seconds * 1000;
    const loops = opts.parts.map((p) =>
      parts[p]().catch((err) => {
        report.problems.push(`${p}: ${(err as Error).message}`);
        log(`${p} stopped: ${(err as Error).message}`);
      }),
    );
    const injector = new FaultInjector(ctx, opts.faults?.kinds ?? []);
    const faulting = (async () => {
      if (!opts.faults) return;
      // The first few seconds without faults: the parts set up.
      await new Promise((r) => setTimeout(r, Math.min(5000, opts.seconds * 200)));
      const inject = async (): Promise<Fault> => {
        const f: Fault = await injector.one().catch((err) => {
          log(`a fault failed to be injected: ${(err as Error).message}`);
          return { kind: 'server', at: '', skipped: true };
        });
        log(
          `fault ${f.kind}${f.skipped ? ' (nothing to hit)' : ''}${f.target ? ` on ${f.target.kind} ${f.target.name}` : ''}`,
        );
        return f;
      };
      while (ctx.running()) {
        await new Promise((r) => setTimeout(r, opts.faults!.everyMs * (0.5 + ctx.rng())));
        if (!ctx.running()) break;
        // A kind with nothing to hit now (no job task running, no proxy started yet) gives its turn to the next
        // kind at once: on a loaded host a short run has few turns (a server kill waits for the restart).
        let f = await inject();
        for (let i = 1; f.skipped && i < opts.faults.kinds.length && ctx.running(); i++) f = await inject();
      }
    })();
    const sampling = (async () => {
      if (!opts.sampleEveryMs) return;
      while (ctx.running()) {
        const pid = s.pid;
        if (pid) {
          const m = await s.call('GET', '/metrics', undefined, { authorization: `Bearer ${METRICS_TOKEN}` });
          const timers = /^nodejs_active_resources\{type="Timeout"\} (\d+)/m.exec(m.text)?.[1];
          const avail =
            Number(/MemAvailable:\s+(\d+)/.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1] ?? 0) / 1024;
          report.samples.push({
            atS: Math.round((Date.now() - started) / 1000),
            ...processFigures(pid),
            ...(timers ? { timers: Number(timers) } : {}),
            storeMb: fileMb(join(s.dataDir, 'berth.db')) + fileMb(join(s.dataDir, 'berth.db-wal')),
            instances: instancesIn(s.dataDir),
            hostAvailableMb: avail,
          });
        }
        await new Promise((r) => setTimeout(r, opts.sampleEveryMs));
      }
    })();
    await Promise.all([...loops, faulting, sampling]);
    report.faults = injector.injected;
    log('load stopped; checking');
    report.verdict = await verify(ctx, report.faults, opts.settleMs);
  } finally {
    // A part that failed ends the run: the other loops stop too.
    stopAt = 0;
    report.serverKills = s.kills;
    host.stop();
    await s.stop().catch(() => undefined);
    await removeSandboxesIn(s.dataDir).catch(() => undefined);
    await unmountVolumesIn(s.dataDir).catch(() => undefined);
    await fake.close();
    report.leftovers = await host.leftoversSettled();
    rmSync(s.dataDir, { recursive: true, force: true });
  }
  return report;
}
