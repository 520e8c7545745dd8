// Runs host tools (ip, nft, mount) for the runtime; failures carry the tool's own message.
// The tools are spawned by long-lived small processes (exec-child.ts, up to three), not by the server: a spawn
// forks the process that makes it, and the server's fork (a heap of 150+ MB) and its wait for the tool's exec held
// the event loop 1.5–4 ms per tool quiet and ~20 ms under load, about thirteen times per sandbox start (decision 073).
import { type ChildProcess, fork } from 'node:child_process';
import { statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { StartAsk, ToolAnswer, ToolAsk, ToolChildMessage } from './exec-child.js';

export class CommandError extends Error {
  constructor(
    readonly command: string,
    readonly stderr: string,
    readonly exitCode: number | null,
  ) {
    super(`${command} failed (${exitCode}): ${stderr.trim()}`);
    this.name = 'CommandError';
  }
}

/** A host tool should answer in well under this; a hang must not wedge a reconcile forever. */
const COMMAND_TIMEOUT_MS = 15_000;
/**
 * The host-tool process ends a tool at COMMAND_TIMEOUT_MS and answers; this long after, it is not answering at all
 * (or the tool ignored its SIGTERM), and the caller is told so rather than left waiting.
 */
const ANSWER_GRACE_MS = 5_000;
/** A detached start answers once its first program runs (what that one starts is not waited for): past this, stuck. */
const START_ANSWER_MS = 10_000;
/** A process whose channel is closed exits at once; one that has not after this is stuck, and killed. */
const STOP_GRACE_MS = 2_000;
/** Node starts in ~50 ms quiet; seconds on a loaded machine. Past this the process is not coming up. */
const START_TIMEOUT_MS = 10_000;

type Pending = {
  child: ChildProcess;
  command: string;
  resolve: (answer: ToolAnswer) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
};

/** What startDetached starts: see StartAsk. */
export type DetachedStart = StartAsk['start'];

/**
 * Host-tool processes at most. A spawn holds the process making it until the tool has exec'd, which on a loaded
 * machine is the scheduler's latency (17.6 ms per spawn on average in one process at load 13, 752 spawns in a
 * bench); commands sent at once to different processes wait out those latencies side by side. A second and third
 * process start only when commands are in flight in every one running.
 */
const HOST_TOOL_PROCESSES = 3;

/**
 * The server's side of the host-tool processes: one started on the first command, more (up to `size`) when
 * commands arrive while every running one has some in flight; one that died is started again by the first command
 * sent to its place (commands it had not answered fail with the reason); all stopped when the last driver using
 * them closes. Each is reached only through the IPC channel it inherited at its fork, a socket pair no other
 * process holds.
 */
export class HostTools {
  private readonly children: (ChildProcess | undefined)[];
  private readonly starting: (Promise<ChildProcess> | undefined)[];
  /** Commands sent to each place and not answered yet, those waiting for its process to start included. */
  private readonly queued: number[];
  private readonly pending = new Map<number, Pending>();
  private readonly stopped = new WeakSet<ChildProcess>();
  private nextId = 1;
  private users = 0;

  constructor(
    private readonly timeoutMs = COMMAND_TIMEOUT_MS,
    size = HOST_TOOL_PROCESSES,
  ) {
    this.children = new Array(size).fill(undefined);
    this.starting = new Array(size).fill(undefined);
    this.queued = new Array(size).fill(0);
  }

  /** A driver uses the process from now on; the last one to `release` it stops it. */
  retain(): void {
    this.users++;
  }

  async release(): Promise<void> {
    this.users = Math.max(0, this.users - 1);
    if (!this.users) await this.stop();
  }

  /** The running processes' pids (tests kill them to play a crash). */
  get pids(): number[] {
    return this.children.flatMap((c) => (c?.pid ? [c.pid] : []));
  }

  /** Runs `cmd args` (stdin `input`) to its end; resolves to its stdout, rejects with a CommandError. */
  async run(cmd: string, args: string[], input?: string): Promise<string> {
    const answer = await this.ask(`${cmd} ${args.join(' ')}`, this.timeoutMs + ANSWER_GRACE_MS, (id) => ({
      id,
      cmd,
      args,
      timeoutMs: this.timeoutMs,
      ...(input === undefined ? {} : { input }),
    }));
    if ('failed' in answer)
      throw new CommandError(answer.command, answer.failed.stderr, answer.failed.exitCode);
    return (answer as { stdout: string }).stdout;
  }

  /**
   * Starts a process in its own session and returns its pid once it runs; it is left running (the host-tool
   * process reaps it when it ends). Failures are plain errors that do not name the command line.
   */
  async startDetached(start: DetachedStart): Promise<number> {
    const answer = await this.ask(start.cmd, START_ANSWER_MS, (id) => ({ id, start }));
    if ('failed' in answer) throw new Error(answer.failed.stderr);
    return (answer as { pid: number }).pid;
  }

  /** Sends one ask to the process of the place `pick` chooses and waits for its answer. */
  private async ask(
    command: string,
    waitMs: number,
    make: (id: number) => ToolAsk,
  ): Promise<ToolAnswer & { command: string }> {
    const slot = this.pick();
    this.queued[slot]++;
    try {
      return await this.send(slot, command, waitMs, make);
    } finally {
      this.queued[slot]--;
    }
  }

  /** Sends one ask to the process of `slot` (started first if none runs there). */
  private async send(
    slot: number,
    command: string,
    waitMs: number,
    make: (id: number) => ToolAsk,
  ): Promise<ToolAnswer & { command: string }> {
    let child: ChildProcess;
    try {
      child = await this.ready(slot);
    } catch (err) {
      throw new CommandError(
        command,
        `the host-tool process could not start: ${(err as Error).message}`,
        null,
      );
    }
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      const timer = setTimeout(
        () => this.settle(id)?.reject(new CommandError(command, `no answer within ${waitMs} ms`, null)),
        waitMs,
      );
      this.pending.set(id, { child, command, resolve: (a) => resolve({ ...a, command }), reject, timer });
      child.channel?.ref(); // a caller awaiting only this answer keeps the server's process alive
      child.send(make(id), (err) => {
        if (err)
          this.settle(id)?.reject(
            new CommandError(command, `the host-tool process is gone: ${err.message}`, null),
          );
      });
    });
  }

  /** Stops the processes; commands they have not answered fail. */
  async stop(): Promise<void> {
    await Promise.all(this.children.map((_, slot) => this.stopOne(slot)));
  }

  private async stopOne(slot: number): Promise<void> {
    const child = this.children[slot] ?? (await this.starting[slot]?.catch(() => undefined));
    if (!child) return;
    if (this.children[slot] === child) this.children[slot] = undefined;
    this.stopped.add(child);
    if (child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      child.ref(); // unref'd at its start: the server waits for this exit
      // Closing its channel is what ends it (it ignores the signals the server's process group gets).
      if (child.connected) child.disconnect();
    });
  }

  /** The place for the next command: an idle running process, else one not running yet, else the least busy. */
  private pick(): number {
    let best = 0;
    let bestScore = Number.POSITIVE_INFINITY;
    this.children.forEach((child, slot) => {
      const running = !!child?.connected || !!this.starting[slot];
      const busy = this.queued[slot];
      const score = running ? (busy ? 2 + busy : 0) : 1;
      if (score < bestScore) [best, bestScore] = [slot, score];
    });
    return best;
  }

  private ready(slot: number): Promise<ChildProcess> {
    const child = this.children[slot];
    if (child?.connected) return Promise.resolve(child);
    this.starting[slot] ??= this.start(slot).finally(() => {
      this.starting[slot] = undefined;
    });
    return this.starting[slot];
  }

  private start(slot: number): Promise<ChildProcess> {
    const entry = childEntry(fileURLToPath(import.meta.url));
    const child = fork(entry, [], {
      // Only the TypeScript loader when running from source (tests): never the server's own flags (--cpu-prof,
      // --test, a heap size).
      execArgv: entry.endsWith('.ts') ? ['--import', 'tsx'] : [],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    child.unref();
    return new Promise<ChildProcess>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`it did not start within ${START_TIMEOUT_MS} ms`));
      }, START_TIMEOUT_MS);
      child.on('message', (m: ToolChildMessage) => {
        if (!('ready' in m)) return this.answered(child, m);
        clearTimeout(timer);
        if (this.stopped.has(child)) return reject(new Error('it was stopped'));
        this.children[slot] = child;
        if (!this.inFlight(child)) child.channel?.unref();
        resolve(child);
      });
      child.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      // Commands go to a new process from here on; this one's unanswered ones fail at its exit, with how it ended.
      child.on('disconnect', () => {
        if (this.children[slot] === child) this.children[slot] = undefined;
        if (!this.stopped.has(child) && child.exitCode === null && child.signalCode === null)
          child.kill('SIGKILL');
      });
      child.on('exit', (code, signal) => {
        clearTimeout(timer);
        if (this.children[slot] === child) this.children[slot] = undefined;
        const how = this.stopped.has(child)
          ? 'it was stopped'
          : signal
            ? `it was killed (${signal})`
            : `it exited with code ${code}`;
        reject(new Error(how));
        for (const [id, p] of this.pending)
          if (p.child === child)
            this.settle(id)?.reject(
              new CommandError(p.command, `the host-tool process ended before answering (${how})`, null),
            );
      });
    });
  }

  private answered(child: ChildProcess, m: ToolAnswer) {
    if (this.pending.get(m.id)?.child !== child) return;
    this.settle(m.id)?.resolve(m);
  }

  /** Takes a command off the pending list; the channel stops holding the server's process once none waits. */
  private settle(id: number): Pending | undefined {
    const p = this.pending.get(id);
    if (!p) return undefined;
    this.pending.delete(id);
    clearTimeout(p.timer);
    if (!this.inFlight(p.child)) p.child.channel?.unref();
    return p;
  }

  private inFlight(child: ChildProcess): number {
    let n = 0;
    for (const p of this.pending.values()) if (p.child === child) n++;
    return n;
  }
}

/** The process's host-tool process: every driver in the process shares it. */
export const hostTools = new HostTools();

export function run(cmd: string, args: string[], input?: string): Promise<string> {
  return hostTools.run(cmd, args, input);
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * The host-tool process's file. Run from source (the tests), the copy `npm run build` compiled from this very source
 * when there is one at least as new: exec-child.ts uses Node's built-ins only, and without the TypeScript loader it
 * starts in a fifth of the time and each of its spawns forks a process half the size.
 */
export function childEntry(here: string): string {
  const entry = here.replace(/exec(\.[jt]s)$/, 'exec-child$1');
  if (!entry.endsWith('.ts')) return entry;
  const built = entry.replace(/\/src\/(runtime\/linux\/exec-child)\.ts$/, '/dist/$1.js');
  try {
    if (built !== entry && statSync(built).mtimeMs >= statSync(entry).mtimeMs) return built;
  } catch {
    // Not built: from source, with the loader.
  }
  return entry;
}
