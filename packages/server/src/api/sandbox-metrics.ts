// Per-sandbox gauges in /metrics, read at scrape time: run state, memory in use and CPU time, labelled by
// workspace and sandbox only (bounded by the sandboxes that exist: one that is gone leaves the output). A scrape
// sees the sandboxes of the workspaces its credential allows (metrics-access.ts).
import { Counter, Gauge, type Registry } from 'prom-client';
import type { RuntimeDriver } from '../runtime/driver.js';
import { sandboxId } from '../runtime/sandbox-id.js';
import type { Store } from '../store/store.js';
import { EVERY_WORKSPACE } from '../store/store.js';

export interface SandboxSample {
  workspace: string;
  sandbox: string;
  state: 'running' | 'standby';
  memoryBytes?: number;
  cpuSeconds?: number;
}

/** Called once per scrape: the sandboxes that run now (running or in standby), with their runtime figures. */
export type SandboxSampler = () => Promise<SandboxSample[]>;

export const SANDBOX_STATES = ['running', 'standby'] as const;

/** The sampler of a store and a runtime: sandbox objects whose runtime sandbox is alive. */
export function sandboxSampler(deps: { store: Store; driver: RuntimeDriver }): SandboxSampler {
  return async () => {
    const infos = await deps.driver.list();
    if (!infos.length) return [];
    const live = new Map(infos.filter((i) => i.state !== 'dead').map((i) => [i.id, i]));
    const out: SandboxSample[] = [];
    for (const o of await deps.store.list({ workspace: EVERY_WORKSPACE, kind: 'Sandbox' })) {
      const id = sandboxId(o.workspace, o.name);
      const info = live.get(id);
      if (!info) continue;
      // A sandbox removed between list() and stats() reads as undefined: it is reported without figures.
      const stats = await deps.driver.stats(id).catch(() => undefined);
      out.push({
        workspace: o.workspace,
        sandbox: o.name,
        state: info.state === 'frozen' ? 'standby' : 'running',
        memoryBytes: stats?.memoryBytes,
        cpuSeconds: stats?.cpuSeconds,
      });
    }
    return out;
  };
}

/** Registers the gauges; returns what the /metrics handler calls before rendering. */
export function registerSandboxMetrics(registry: Registry, sample: SandboxSampler) {
  const labelNames = ['workspace', 'sandbox'] as const;
  const state = new Gauge({
    name: 'berth_sandbox_state',
    help: 'Run state of each sandbox: 1 for the state it is in, 0 for the other (running, standby)',
    labelNames: [...labelNames, 'state'] as const,
    registers: [registry],
  });
  const memory = new Gauge({
    name: 'berth_sandbox_memory_bytes',
    help: 'Memory charged to each sandbox (its cgroup), in bytes',
    labelNames,
    registers: [registry],
  });
  // A counter whose value is read from the kernel at scrape time (so rate() works): reset, then set by inc().
  const cpu = new Counter({
    name: 'berth_sandbox_cpu_seconds_total',
    help: 'CPU time used by each sandbox since it started, in seconds',
    labelNames,
    registers: [registry],
  });
  return async function refresh() {
    // A runtime that cannot open (no root, no bubblewrap) has no sandboxes to report; the scrape still answers.
    const samples = await sample().catch(() => [] as SandboxSample[]);
    state.reset();
    memory.reset();
    cpu.reset();
    for (const s of samples) {
      const l = { workspace: s.workspace, sandbox: s.sandbox };
      for (const st of SANDBOX_STATES) state.set({ ...l, state: st }, s.state === st ? 1 : 0);
      if (s.memoryBytes !== undefined && Number.isFinite(s.memoryBytes)) memory.set(l, s.memoryBytes);
      if (s.cpuSeconds !== undefined) cpu.inc(l, s.cpuSeconds);
    }
  };
}
