// Runs the egress child process (child.ts) for the driver: starts it on first use, feeds it every sandbox's
// policy keyed by the sandbox's address, and restarts it when it dies, re-sending the policies.
import { type ChildProcess, fork } from 'node:child_process';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CaMaterial } from './ca.js';
import type { EgressPolicy } from './policy.js';
import type { ChildConfig, FromChild, ToChild, TrafficEvent } from './protocol.js';

/** The child binds four ports and answers: more than this means it cannot start (a port taken, say). */
const START_TIMEOUT_MS = 10_000;
/** Pause before a restart, so a child that dies at once does not spin a core. */
const RESTART_DELAY_MS = 200;
const MAX_RESTART_DELAY_MS = 5_000;

/**
 * How long set() waits for the child to confirm it holds a policy. Milliseconds normally (one IPC round trip);
 * past this the child is stuck or dying, and its restart re-sends every policy anyway.
 */
const APPLY_TIMEOUT_MS = 5_000;

/**
 * The child ended while sandboxes were under a policy (`down`, with how), or is back after it (`up`): what a
 * sandbox's outbound connections went through was not there meanwhile. `sources`: the addresses it carried.
 */
export type ProxyEvent =
  | { type: 'proxy'; state: 'down'; sources: string[]; reason: string }
  | { type: 'proxy'; state: 'up'; sources: string[]; downMs: number };

export type EgressEvent = TrafficEvent | ProxyEvent;

export class EgressSupervisor {
  private child?: ChildProcess;
  private starting?: Promise<void>;
  private closed = false;
  private readonly policies = new Map<string, { policy: EgressPolicy; ca?: CaMaterial }>();
  private readonly pending = new Map<number, () => void>();
  private seq = 0;
  /** Times the child was started; a restart is a start after the first. */
  starts = 0;
  /** When the child died under policies (performance.now()), until its restart is ready. */
  private downSince?: number;
  /** Starts in a row that ended before the child was ready. */
  private failedStarts = 0;

  constructor(
    private readonly config: ChildConfig,
    private readonly onEvent: (e: EgressEvent) => void = () => undefined,
  ) {}

  /**
   * Sets (or replaces) the policy of the sandbox at `source`; the child is started if it does not run. Resolves
   * once the child holds it: a sandbox whose first connection raced the IPC message would be refused (deny-all
   * while its policy is unknown) although its policy allows the host.
   */
  async set(source: string, policy: EgressPolicy, ca?: CaMaterial): Promise<void> {
    this.policies.set(source, { policy, ca });
    // A start cut short (the child killed before it was ready) is followed by the restart its exit scheduled.
    await this.ensureRunning().catch(async () => {
      await new Promise((r) => setTimeout(r, RESTART_DELAY_MS));
      await this.ensureRunning();
    });
    const seq = ++this.seq;
    await new Promise<void>((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        this.pending.delete(seq);
        resolve();
      };
      const timer = setTimeout(finish, APPLY_TIMEOUT_MS);
      this.pending.set(seq, finish);
      if (!this.send({ type: 'policy', source, policy, ca, seq })) finish();
    });
  }

  /** The policy the child holds for `source` (with its secrets: compare, never store). */
  current(source: string): EgressPolicy | undefined {
    return this.policies.get(source)?.policy;
  }

  forget(source: string): void {
    if (this.policies.delete(source)) this.send({ type: 'forget', source });
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  ensureRunning(): Promise<void> {
    if (this.child?.connected) return Promise.resolve();
    if (this.closed) return Promise.reject(new Error('the egress proxy is stopped: the server is closing'));
    this.starting ??= this.start().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  /** False when no child is connected (the policy goes with the re-send at its next start). */
  private send(m: ToChild): boolean {
    if (!this.child?.connected) return false;
    this.child.send(m);
    return true;
  }

  private start(): Promise<void> {
    const here = fileURLToPath(import.meta.url);
    const entry = here.replace(/supervisor(\.[jt]s)$/, `child${extname(here)}`);
    const child = fork(entry, [], {
      // Only the TypeScript loader when running from source (tests) and the server's profiling flags (a server
      // started with --cpu-prof profiles the proxy too: every policed connection's work is here): never the
      // parent's other flags (--test).
      execArgv: [...(entry.endsWith('.ts') ? ['--import', 'tsx'] : []), ...profilingFlags(process.execArgv)],
      env: {
        ...process.env,
        BERTH_EGRESS_CONFIG: JSON.stringify(this.config),
        ...(this.config.upstreamCaFile ? { NODE_EXTRA_CA_CERTS: this.config.upstreamCaFile } : {}),
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.starts++;
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`the egress proxy did not start within ${START_TIMEOUT_MS} ms`));
      }, START_TIMEOUT_MS);
      child.on('message', (m: FromChild) => {
        if (m.type === 'ready') {
          clearTimeout(timer);
          this.failedStarts = 0;
          this.child = child;
          for (const [source, p] of this.policies) child.send({ type: 'policy', source, ...p });
          if (this.downSince !== undefined) {
            const downMs = Math.round(performance.now() - this.downSince);
            this.downSince = undefined;
            this.onEvent({ type: 'proxy', state: 'up', sources: [...this.policies.keys()], downMs });
          }
          resolve();
        } else if (m.type === 'applied') {
          this.pending.get(m.seq)?.();
        } else if (m.type === 'failed') {
          clearTimeout(timer);
          reject(new Error(`the egress proxy could not start: ${m.message}`));
        } else if (m.type === 'traffic') for (const e of m.events) this.onEvent(e);
      });
      child.on('exit', (code, signal) => {
        clearTimeout(timer);
        const starting = this.child !== child;
        const how = signal ? `was killed (${signal})` : `exited with code ${code}`;
        if (starting) reject(new Error(`the egress proxy ${how} during its start`));
        else {
          this.child = undefined;
          // Its restart re-sends every policy: nobody waits for this child's answers.
          for (const answer of [...this.pending.values()]) answer();
        }
        // Ended while starting too (killed before it said ready): started again, or the policies it was started for
        // would have no proxy until the next policy change.
        if (!this.closed && this.policies.size) {
          if (this.downSince === undefined) {
            this.downSince = performance.now();
            const reason = starting ? `${how} while it started` : how;
            this.onEvent({ type: 'proxy', state: 'down', sources: [...this.policies.keys()], reason });
          }
          // A child that cannot start (its ports held, say) is tried again less and less often.
          this.failedStarts = starting ? this.failedStarts + 1 : 0;
          const delay = Math.min(RESTART_DELAY_MS * 2 ** this.failedStarts, MAX_RESTART_DELAY_MS);
          setTimeout(() => void this.ensureRunning().catch(() => undefined), delay).unref();
        }
      });
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    // A child still starting is waited for and stopped too: once ready, its channel would keep this process alive.
    await this.starting?.catch(() => undefined);
    const c = this.child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve());
      c.kill('SIGTERM');
    });
  }
}

/** The server's own profiling flags (`--cpu-prof`, `--cpu-prof-dir=...`, `--heap-prof...`), passed on to the child. */
export function profilingFlags(execArgv: readonly string[]): string[] {
  return execArgv.filter((a) => /^--(cpu|heap)-prof(-[a-z]+)?(=|$)/.test(a));
}
