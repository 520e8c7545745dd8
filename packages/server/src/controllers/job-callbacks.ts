// When an execution ends, each enabled trigger of its job with a `callbackUrl` is told: POST {executionId, status,
// stats, startedAt, finishedAt}, signed as DESIGN.md §4 (crypto/webhook-signature.ts), retried `retry` times with
// backoff. A target that resolves into a private, loopback, link-local or reserved range is refused (the server
// must not be a way into the network around it) unless BERTH_CALLBACK_ALLOW_CIDRS opens that range; the check is
// made on the address actually connected to, so a DNS answer cannot change between check and use.
import { lookup } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import type { Logger } from 'pino';
import { Agent, fetch } from 'undici';
import { webhookHeaders } from '../crypto/webhook-signature.js';
import type { Resources } from '../store/resources.js';
import type { ExecutionRecord } from './job-store.js';

/** Retries when the trigger names none: a receiver restarting for a few seconds still gets the callback. */
export const DEFAULT_CALLBACK_RETRIES = 3;
/** First retry after this long, doubling. */
export const CALLBACK_BACKOFF_MS = 1_000;
/** A receiver slower than this is counted as failed for that attempt. */
export const CALLBACK_TIMEOUT_MS = 10_000;

const BLOCKED_V4 = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const;
const BLOCKED_V6 = [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const;

export class CallbackRefused extends Error {
  override name = 'CallbackRefused';
}

export function callbackBlockList(allowCidrs: string[]) {
  const blocked = new BlockList();
  for (const [a, p] of BLOCKED_V4) blocked.addSubnet(a, p, 'ipv4');
  for (const [a, p] of BLOCKED_V6) blocked.addSubnet(a, p, 'ipv6');
  const allowed = new BlockList();
  for (const c of allowCidrs) {
    const [a, p] = c.split('/');
    allowed.addSubnet(a, Number(p ?? 32), 'ipv4');
  }
  return (address: string) => {
    const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    return blocked.check(address, family) && !allowed.check(address, family);
  };
}

export interface CallbackDeps {
  resources: Resources;
  logger?: Logger;
  allowCidrs?: string[];
  now?: () => number;
}

export class JobCallbacks {
  private readonly isBlocked: (address: string) => boolean;
  private readonly agent: Agent;

  constructor(private readonly deps: CallbackDeps) {
    this.isBlocked = callbackBlockList(deps.allowCidrs ?? []);
    this.agent = new Agent({
      connect: {
        lookup: (host, opts, cb) =>
          lookup(host, { ...opts, all: false }, (err, address, family) => {
            if (!err && this.isBlocked(address))
              return cb(
                new CallbackRefused(`${host} resolves to ${address}, a private or reserved address`),
                '',
                0,
              );
            cb(err, address, family);
          }),
      },
    });
  }

  /** Sends the execution's callbacks in the background; failures are logged, never thrown. */
  notify(workspace: string, rec: ExecutionRecord, stats: Record<string, number>) {
    void this.send(workspace, rec, stats).catch((err) =>
      this.deps.logger?.warn({ err, execution: rec.id }, 'job callbacks failed'),
    );
  }

  private async send(workspace: string, rec: ExecutionRecord, stats: Record<string, number>) {
    const { resources } = this.deps;
    const job = await resources.store.get({ kind: 'Job', workspace, parent: '', name: rec.job });
    if (!job) return;
    const spec = resources.openSecrets(resources.kind('Job'), job.body.spec ?? {});
    const body = JSON.stringify({
      executionId: rec.id,
      job: rec.job,
      status: rec.status,
      stats,
      startedAt: rec.startedAt ?? rec.createdAt,
      finishedAt: rec.completedAt,
    });
    for (const t of spec.triggers ?? []) {
      const c = t.configuration ?? {};
      if (t.enabled === false || !c.callbackUrl || !c.callbackSecret) continue;
      await this.deliver(
        c.callbackUrl,
        c.callbackSecret,
        `msg_${rec.id}_${t.id ?? 'trigger'}`,
        body,
        c.retry,
      );
    }
  }

  private async deliver(url: string, secret: string, id: string, body: string, retry?: number) {
    const u = new URL(url);
    const host = u.hostname.replace(/^\[|\]$/g, '');
    if (isIP(host) && this.isBlocked(host))
      throw new CallbackRefused(`callback target ${host} is a private or reserved address`);
    const tries = 1 + (retry ?? DEFAULT_CALLBACK_RETRIES);
    for (let i = 0; i < tries; i++) {
      const ts = Math.floor((this.deps.now ?? Date.now)() / 1000);
      try {
        const res = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...webhookHeaders(secret, id, ts, body) },
          body,
          dispatcher: this.agent,
          signal: AbortSignal.timeout(CALLBACK_TIMEOUT_MS),
        });
        await res.body?.cancel();
        if (res.ok) return;
        this.deps.logger?.warn({ url: u.origin, status: res.status, attempt: i + 1 }, 'job callback refused');
      } catch (err) {
        if ((err as { cause?: unknown }).cause instanceof CallbackRefused)
          throw (err as { cause: Error }).cause;
        this.deps.logger?.warn({ err, url: u.origin, attempt: i + 1 }, 'job callback failed');
      }
      if (i + 1 < tries) await new Promise((r) => setTimeout(r, CALLBACK_BACKOFF_MS * 2 ** i));
    }
  }
}
