// The registry of processes started through the API: lookup by id, OS pid or name, retention of finished ones,
// and the counts the host reads from /health to decide whether the sandbox may go to standby.
import { conflict } from '../http.js';
import { ManagedProcess, type ProcessSpec } from './managed-process.js';

/** Finished processes kept for GET /process and their logs; older ones are forgotten first. */
export const MAX_FINISHED_PROCESSES = 200;
/** Log bytes all finished processes may hold together before the oldest are forgotten (see MAX_LOG_BYTES). */
export const FINISHED_LOG_BUDGET = 16 * 1024 * 1024;
/** keepAlive without a timeout ends after this long (the SDK's documented default), 0 in the request = never. */
export const KEEPALIVE_DEFAULT_TIMEOUT_S = 600;

export class ProcessManager {
  private procs = new Map<string, ManagedProcess>();

  /** Starts a process; a name already used by a running process is a 409. */
  start(spec: ProcessSpec): ManagedProcess {
    if (spec.name) {
      const same = this.byName(spec.name);
      if (same?.running) throw conflict(`process with name '${spec.name}' already exists and is running`);
    }
    const p = new ManagedProcess(spec, () => this.prune());
    p.start();
    // OS pids are reused: a finished record holding the same id is stale.
    this.procs.delete(p.id);
    this.procs.set(p.id, p);
    return p;
  }

  /**
   * Takes over processes an earlier daemon code started in this same process (upgrade.ts): they stay its
   * children, so nothing about them changes; they keep the code that started them until they end.
   */
  adopt(procs: ManagedProcess[]): void {
    for (const p of procs) this.procs.set(p.id, p);
  }

  /** By id, then by current OS pid (after a restart), then by name (the newest). */
  find(identifier: string): ManagedProcess | undefined {
    const direct = this.procs.get(identifier);
    if (direct) return direct;
    const pid = /^\d+$/.test(identifier) ? Number(identifier) : undefined;
    if (pid !== undefined) {
      for (const p of this.procs.values()) if (p.osPid === pid && p.running) return p;
    }
    return this.byName(identifier);
  }

  /** Drops a finished process from the registry (the daemon's own warm-up, process/warm-up.ts). */
  forget(id: string): void {
    if (this.procs.get(id)?.running === false) this.procs.delete(id);
  }

  list(): ManagedProcess[] {
    return [...this.procs.values()];
  }

  get runningCount(): number {
    let n = 0;
    for (const p of this.procs.values()) if (p.running) n++;
    return n;
  }

  get activeKeepAlive(): number {
    let n = 0;
    for (const p of this.procs.values()) if (p.running && p.spec.keepAlive) n++;
    return n;
  }

  /** For shutdown: every running process group gets SIGKILL. */
  killAll(): void {
    for (const p of this.procs.values()) p.kill();
  }

  private byName(name: string): ManagedProcess | undefined {
    let found: ManagedProcess | undefined;
    for (const p of this.procs.values()) if (p.spec.name === name) found = p;
    return found;
  }

  private prune(): void {
    const finished = [...this.procs.values()].filter((p) => !p.running);
    let bytes = finished.reduce((n, p) => n + p.logs.bytes, 0);
    let count = finished.length;
    for (const p of finished) {
      if (count <= MAX_FINISHED_PROCESSES && bytes <= FINISHED_LOG_BUDGET) break;
      this.procs.delete(p.id);
      count--;
      bytes -= p.logs.bytes;
    }
  }
}
