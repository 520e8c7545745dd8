// One process started through the API: spawns it in its own process group, captures its output, applies its
// timeout and restart policy, and records how it ended. Its `id` (the first OS pid) stays stable across restarts.
import { type ChildProcess, spawn } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import type { ProcessJson, ProcessStatus } from '../schema.js';
import { planSpawn, resolveProgram, type SpawnPlan, shellPlan } from './command.js';
import { LogBuffer } from './log-buffer.js';
import { asUserProcess } from './oom-score.js';

/** After SIGTERM (stop, timeout), how long a process may take before SIGKILL. */
export const STOP_GRACE_MS = 5_000;
/**
 * After the process exits, how long to wait for its pipes to close before declaring it done: a background child
 * that inherited stdout (`server &`) would otherwise hold the answer open for as long as it lives.
 */
export const STDIO_DRAIN_MS = 100;
/** First restart delay; doubles per restart up to MAX_RESTART_DELAY_MS, so a crash loop cannot spin the CPU. */
export const RESTART_DELAY_MS = 100;
export const MAX_RESTART_DELAY_MS = 5_000;
/** restartOnFailure without a usable maxRestarts restarts this many times. */
export const DEFAULT_MAX_RESTARTS = 3;

export interface ProcessSpec {
  command: string;
  name: string;
  workingDir: string;
  env: NodeJS.ProcessEnv;
  /** 0 = no limit. */
  timeoutMs: number;
  keepAlive: boolean;
  restartOnFailure: boolean;
  /** Negative = unlimited. */
  maxRestarts: number;
  stdin: boolean | string;
}

export class SpawnError extends Error {}

export class ManagedProcess {
  id = '';
  osPid: number | undefined;
  status: ProcessStatus = 'running';
  exitCode = 0;
  readonly startedAt = new Date();
  completedAt: Date | undefined;
  restartCount = 0;
  readonly logs = new LogBuffer();

  private child: ChildProcess | undefined;
  private requested: 'stopped' | 'killed' | undefined;
  private timers = new Set<NodeJS.Timeout>();
  private stdinOpen = false;
  private resolveFinal!: () => void;
  /** Settles once the process is final (no restart pending). */
  readonly final: Promise<void> = new Promise((r) => {
    this.resolveFinal = r;
  });

  constructor(
    readonly spec: ProcessSpec,
    private readonly onFinal: (p: ManagedProcess) => void = () => {},
  ) {}

  get running(): boolean {
    return this.status === 'running';
  }

  /** Starts the process; throws SpawnError when it cannot be started at all. */
  start(): void {
    this.spawnChild();
    if (this.spec.timeoutMs > 0) this.later(this.spec.timeoutMs, () => this.terminate('killed', 'SIGTERM'));
  }

  /** SIGTERM to the whole process group, SIGKILL after STOP_GRACE_MS. False if it was not running. */
  stop(): boolean {
    return this.terminate('stopped', 'SIGTERM');
  }

  kill(): boolean {
    return this.terminate('killed', 'SIGKILL');
  }

  async writeStdin(data: Buffer): Promise<boolean> {
    const stdin = this.child?.stdin;
    if (!stdin || !this.stdinOpen || !this.running) return false;
    await new Promise<void>((resolve, reject) => stdin.write(data, (err) => (err ? reject(err) : resolve())));
    return true;
  }

  closeStdin(): void {
    this.stdinOpen = false;
    this.child?.stdin?.end();
  }

  toJson(): ProcessJson {
    return {
      pid: this.id,
      name: this.spec.name,
      command: this.spec.command,
      status: this.status,
      exitCode: this.exitCode,
      startedAt: this.startedAt.toUTCString(),
      completedAt: this.completedAt ? this.completedAt.toUTCString() : '',
      workingDir: this.spec.workingDir,
      logs: this.logs.text(),
      stdout: this.logs.text('stdout'),
      stderr: this.logs.text('stderr'),
      restartCount: this.restartCount,
      restartOnFailure: this.spec.restartOnFailure,
      maxRestarts: this.spec.maxRestarts,
      keepAlive: this.spec.keepAlive,
      stdin: this.spec.stdin === true,
    };
  }

  private spawnChild(plan: SpawnPlan = this.plan()): void {
    const child = spawn(plan.file, plan.args, {
      argv0: plan.argv0,
      cwd: this.spec.workingDir,
      env: this.spec.env,
      stdio: [this.spec.stdin === false ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      // Own session and process group: stop/kill reach every descendant, and no terminal signal reaches us.
      detached: true,
    });
    child.on('error', () => {});
    if (child.pid === undefined) {
      // Not started (no such program, not executable): let a shell try, so the caller gets the shell's own
      // message and exit code (127/126) exactly as with a shell command.
      if (!plan.shell) {
        this.spawnChild(shellPlan(this.spec.command));
        return;
      }
      throw new SpawnError(
        `cannot start process in ${this.spec.workingDir}: ${plan.file} could not be executed`,
      );
    }
    asUserProcess(child.pid);
    this.child = child;
    this.osPid = child.pid;
    if (!this.id) this.id = String(child.pid);
    child.stdout?.on('data', (d: Buffer) => this.logs.push('stdout', d));
    child.stderr?.on('data', (d: Buffer) => this.logs.push('stderr', d));
    if (child.stdin) {
      child.stdin.on('error', () => {});
      if (typeof this.spec.stdin === 'string') child.stdin.end(this.spec.stdin);
      else this.stdinOpen = true;
    }
    let drain: NodeJS.Timeout | undefined;
    child.once('exit', (code, signal) => {
      drain = this.later(STDIO_DRAIN_MS, () => this.exited(child, code, signal));
    });
    child.once('close', (code, signal) => {
      if (drain) this.clear(drain);
      this.exited(child, code, signal);
    });
  }

  /**
   * Direct when the command is a plain word list naming an existing program; else the shell, which also says
   * "not found" with the usual 127 when there is no such program.
   */
  private plan(): SpawnPlan {
    const plan = planSpawn(this.spec.command);
    if (plan.shell) return plan;
    const program = resolveProgram(plan.file, this.spec.env.PATH, this.spec.workingDir);
    return program ? { ...plan, file: program, argv0: plan.file } : shellPlan(this.spec.command);
  }

  private exited(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.child !== child) return;
    this.child = undefined;
    this.stdinOpen = false;
    this.exitCode = code ?? 128 + (signal ? (osConstants.signals[signal] ?? 0) : 0);
    if (this.requested || this.exitCode === 0) {
      this.finish(this.requested ?? 'completed');
      return;
    }
    const limit = this.spec.maxRestarts;
    if (this.spec.restartOnFailure && (limit < 0 || this.restartCount < limit)) {
      const delay = Math.min(RESTART_DELAY_MS * 2 ** this.restartCount, MAX_RESTART_DELAY_MS);
      this.restartCount++;
      this.later(delay, () => {
        if (!this.running || this.requested) return;
        try {
          this.spawnChild();
        } catch {
          this.exitCode = 127;
          this.finish('failed');
        }
      });
      return;
    }
    this.finish('failed');
  }

  private terminate(status: 'stopped' | 'killed', signal: NodeJS.Signals): boolean {
    if (!this.running) return false;
    this.requested ??= status;
    if (!this.child) {
      // Between a failure and its restart: nothing to signal.
      this.finish(this.requested);
      return true;
    }
    const pid = this.child.pid!;
    signalGroup(pid, signal);
    // Not tied to this process's timers: descendants that ignore SIGTERM must go even after the leader exited.
    if (signal !== 'SIGKILL') setTimeout(() => signalGroup(pid, 'SIGKILL'), STOP_GRACE_MS).unref();
    return true;
  }

  private finish(status: ProcessStatus): void {
    if (!this.running) return;
    this.status = status;
    this.completedAt = new Date();
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.logs.end();
    this.resolveFinal();
    this.onFinal(this);
  }

  private later(ms: number, fn: () => void): NodeJS.Timeout {
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
    return t;
  }

  private clear(t: NodeJS.Timeout): void {
    clearTimeout(t);
    this.timers.delete(t);
  }
}

/** Signals the process group `pid` leads (every descendant that did not leave it). */
function signalGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    try {
      process.kill(pid, sig);
    } catch {
      // already gone
    }
  }
}
