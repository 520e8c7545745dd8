// Asynchronous invocations of agents (`?async=true`): their record while they run and for a while after, read by
// `GET /v0/agents/{name}/executions/{id}`, and the delivery of the signed callback (DESIGN.md §4). Kept in memory:
// a restarted server forgets running and past executions (decision 023).
import { randomBytes } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { Logger } from 'pino';
import { webhookHeaders } from '../crypto/webhook-signature.js';

/** Finished executions are kept this long for polling. */
export const EXECUTION_RETENTION_MS = 60 * 60_000;
/** Executions kept at once; the oldest finished ones go first beyond it. */
const MAX_EXECUTIONS = 10_000;
/** Output kept (and sent in the callback) per execution: the Standard Webhooks guidance keeps payloads small. */
export const MAX_OUTPUT_BYTES = 256 * 1024;
/** One delivery attempt's bound (the Standard Webhooks guidance: 15–30 s). */
export const CALLBACK_TIMEOUT_MS = 15_000;
/** Backoff before retry n (1-based): 1 s, 5 s, 30 s, then 2 min (the spec's schedule, shortened for agents). */
const RETRY_DELAYS_MS = [1_000, 5_000, 30_000, 120_000];

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
  allowPrivate: boolean;
  now?: () => number;
  /** Tests shorten the retry delays. */
  retryDelaysMs?: number[];
}

/** Loopback, link-local, private, CGNAT, unspecified and unique-local addresses: never callback targets by default. */
export function isPrivateAddress(ip: string): boolean {
  if (isIP(ip) === 6) {
    const l = ip.toLowerCase();
    if (l.startsWith('::ffff:')) return isPrivateAddress(l.slice(7));
    return l === '::1' || l === '::' || /^f[cd]/.test(l) || /^fe[89ab]/.test(l);
  }
  const [a, b] = ip.split('.').map(Number);
  return (
    a === 0 ||
    a === 10 ||
    a === 127 ||
    (a === 169 && b === 254) ||
    (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) ||
    (a === 100 && b >= 64 && b <= 127)
  );
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
    if (cb) void this.deliver(e, cb);
  }

  /** Refuses a callback URL whose host resolves to a private address (unless allowed); the reason, or undefined. */
  async refusal(url: string): Promise<string | undefined> {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      return `callbackUrl ${JSON.stringify(url)} is not a URL`;
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return 'callbackUrl must be http or https';
    if (this.deps.allowPrivate) return undefined;
    const host = u.hostname.replace(/^\[|\]$/g, '');
    const addrs = isIP(host)
      ? [host]
      : (await lookup(host, { all: true }).catch(() => [])).map((a) => a.address);
    if (!addrs.length) return `callbackUrl host ${host} does not resolve`;
    const bad = addrs.find(isPrivateAddress);
    return bad ? `callbackUrl resolves to ${bad}, a loopback, link-local or private address` : undefined;
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
    e.callback = { url: cb.url, delivered: false, attempts: 0 };
    const refused = await this.refusal(cb.url);
    if (refused) {
      e.callback.error = refused;
      return;
    }
    const delays = this.deps.retryDelaysMs ?? RETRY_DELAYS_MS;
    for (let attempt = 0; attempt <= cb.retry; attempt++) {
      if (attempt > 0)
        await new Promise((r) => setTimeout(r, delays[Math.min(attempt - 1, delays.length - 1)]));
      e.callback.attempts++;
      try {
        // The webhook-id stays the same across retries: receivers deduplicate by it.
        const headers = webhookHeaders(cb.secret, e.id, Math.floor(this.now() / 1000), body);
        const res = await fetch(cb.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body,
          redirect: 'manual',
          signal: AbortSignal.timeout(CALLBACK_TIMEOUT_MS),
        });
        e.callback.lastStatus = res.status;
        await res.body?.cancel();
        if (res.status >= 200 && res.status < 300) {
          e.callback.delivered = true;
          return;
        }
        // 410 Gone: the receiver asks never to be called again for this.
        if (res.status === 410) return;
      } catch (err) {
        e.callback.error = (err as Error).message;
      }
    }
    this.deps.logger?.warn({ execution: e.id, url: cb.url }, 'callback not delivered');
  }

  private prune() {
    const cutoff = this.now() - EXECUTION_RETENTION_MS;
    for (const [id, e] of this.byId) {
      if (this.byId.size < MAX_EXECUTIONS && !(e.finishedAt && Date.parse(e.finishedAt) < cutoff)) continue;
      if (e.status !== 'running') this.byId.delete(id);
    }
  }
}
