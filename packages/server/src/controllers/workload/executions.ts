// Asynchronous invocations of agents (`?async=true`): their record while they run and for a while after, read by
// `GET /v0/agents/{name}/executions/{id}`; the signed callback goes through controllers/code/callbacks.ts (persisted,
// so it survives a restart). The records are kept in memory: a restarted server forgets running and past
// executions (decision 023), not the callbacks they queued (decision 030).
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Callbacks } from '../code/callbacks.js';

/** Finished executions are kept this long for polling. */
export const EXECUTION_RETENTION_MS = 60 * 60_000;
/** Executions kept at once; the oldest finished ones go first beyond it. */
const MAX_EXECUTIONS = 10_000;
/** Output kept (and sent in the callback) per execution: the Standard Webhooks guidance keeps payloads small. */
export const MAX_OUTPUT_BYTES = 256 * 1024;

export interface Execution {
  id: string;
  workspace: string;
  agent: string;
  status: 'running' | 'completed' | 'failed';
  startedAt: string;
  finishedAt?: string;
  statusCode?: number;
  output?: string;
  error?: string;
  callback?: { url: string; delivered: boolean; attempts: number; lastStatus?: number; error?: string };
}

export interface CallbackTarget {
  url: string;
  secret: string;
  retry: number;
}

export interface ExecutionsDeps {
  logger?: Logger;
  callbacks: Callbacks;
  now?: () => number;
}

export class Executions {
  private readonly byId = new Map<string, Execution>();
  private readonly now: () => number;
  constructor(private readonly deps: ExecutionsDeps) {
    this.now = deps.now ?? Date.now;
  }

  start(workspace: string, agent: string): Execution {
    this.prune();
    const e: Execution = {
      id: `exec_${randomBytes(12).toString('hex')}`,
      workspace,
      agent,
      status: 'running',
      startedAt: new Date(this.now()).toISOString(),
    };
    this.byId.set(e.id, e);
    return e;
  }

  get(workspace: string, agent: string, id: string): Execution | undefined {
    const e = this.byId.get(id);
    return e && e.workspace === workspace && e.agent === agent ? e : undefined;
  }

  /** Records the outcome, then delivers the callback (in the background) when there is one. */
  finish(
    e: Execution,
    outcome: { statusCode?: number; output?: string; error?: string },
    cb?: CallbackTarget,
  ) {
    e.finishedAt = new Date(this.now()).toISOString();
    e.statusCode = outcome.statusCode;
    e.output = outcome.output;
    e.error = outcome.error;
    e.status = outcome.error || (outcome.statusCode ?? 500) >= 400 ? 'failed' : 'completed';
    if (cb)
      void this.deliver(e, cb).catch((err) =>
        this.deps.logger?.warn({ err, execution: e.id }, 'callback could not be queued'),
      );
  }

  /** Why a callback URL is refused (see controllers/code/callbacks.ts), or undefined. */
  refusal(url: string): Promise<string | undefined> {
    return this.deps.callbacks.refusal(url);
  }

  private async deliver(e: Execution, cb: CallbackTarget) {
    const body = JSON.stringify({
      type: e.status === 'completed' ? 'execution.completed' : 'execution.failed',
      timestamp: new Date(this.now()).toISOString(),
      data: {
        executionId: e.id,
        status: e.status,
        statusCode: e.statusCode,
        ...(e.error ? { error: e.error } : { output: e.output }),
        startedAt: e.startedAt,
        finishedAt: e.finishedAt,
      },
    });
    const state: NonNullable<Execution['callback']> = { url: cb.url, delivered: false, attempts: 0 };
    e.callback = state;
    await this.deps.callbacks.send(
      {
        workspace: e.workspace,
        owner: `Agent/${e.agent}`,
        id: e.id,
        url: cb.url,
        secret: cb.secret,
        body,
        retry: cb.retry,
      },
      (s) => Object.assign(state, s),
    );
  }

  private prune() {
    const cutoff = this.now() - EXECUTION_RETENTION_MS;
    for (const [id, e] of this.byId) {
      if (this.byId.size < MAX_EXECUTIONS && !(e.finishedAt && Date.parse(e.finishedAt) < cutoff)) continue;
      if (e.status !== 'running') this.byId.delete(id);
    }
  }
}
