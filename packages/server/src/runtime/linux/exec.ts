// Runs host tools (ip, nft, mount) for the runtime; failures carry the tool's own message.
// The tools are spawned by one long-lived small process (exec-child.ts), not by the server: a spawn forks the process
// that makes it, and the server's fork (a heap of 150+ MB) and its wait for the tool's exec held the event loop
// 1.5–4 ms per tool quiet and ~20 ms under load, about twenty times per sandbox start (decision 073).
import { type ChildProcess, fork } from 'node:child_process';
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
/** A detached start answers once the process is spawned (its exec is not waited for); this is a stuck one. */
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
 * The server's side of the host-tool process: started on the first command, restarted by the first command after
 * it died (commands it had not answered fail with the reason), stopped when the last driver using it closes. It is
 * reached only through the IPC channel it inherited at its fork, a socket pair no other process holds.
 */
export class HostTools {
  private child?: ChildProcess;
  private starting?: Promise<ChildProcess>;
  private readonly pending = new Map<number, Pending>();
  private readonly stopped = new WeakSet<ChildProcess>();
  private nextId = 1;
  private users = 0;
  constructor(private readonly timeoutMs = COMMAND_TIMEOUT_MS) {}

  /** A driver uses the process from now on; the last one to `release` it stops it. */
  retain(): void {
    this.users++;
  }

  async release(): Promise<void> {
    this.users = Math.max(0, this.users - 1);
    if (!this.users) await this.stop();
  }

  /** The running process's pid (tests kill it to play a crash). */
  get pid(): number | undefined {
    return this.child?.pid;
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

  /** Sends one ask to the running process (started first if none runs) and waits for its answer. */
  private async ask(
    command: string,
    waitMs: number,
    make: (id: number) => ToolAsk,
  ): Promise<ToolAnswer & { command: string }> {
    let child: ChildProcess;
    try {
      child = await this.ready();
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

  /** Stops the process; commands it has not answered fail. */
  async stop(): Promise<void> {
    const child = this.child ?? (await this.starting?.catch(() => undefined));
    if (!child) return;
    this.child = undefined;
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

  private ready(): Promise<ChildProcess> {
    if (this.child?.connected) return Promise.resolve(this.child);
    this.starting ??= this.start().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  private start(): Promise<ChildProcess> {
    const here = fileURLToPath(import.meta.url);
    const entry = here.replace(/exec(\.[jt]s)$/, 'exec-child$1');
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
        this.child = child;
        if (!this.inFlight(child)) child.channel?.unref();
        resolve(child);
      });
      child.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      // Commands go to a new process from here on; this one's unanswered ones fail at its exit, with how it ended.
      child.on('disconnect', () => {
        if (this.child === child) this.child = undefined;
        if (!this.stopped.has(child) && child.exitCode === null && child.signalCode === null)
          child.kill('SIGKILL');
      });
      child.on('exit', (code, signal) => {
        clearTimeout(timer);
        if (this.child === child) this.child = undefined;
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

  private inFlight(child: ChildProcess): boolean {
    for (const p of this.pending.values()) if (p.child === child) return true;
    return false;
  }
}

/** The process's host-tool process: every driver in the process shares it. */
export const hostTools = new HostTools();

export function run(cmd: string, args: string[], input?: string): Promise<string> {
  return hostTools.run(cmd, args, input);
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
