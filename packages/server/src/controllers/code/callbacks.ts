// Signed callbacks (DESIGN.md §4): the one delivery path of agents' asynchronous calls and jobs' executions. A
// callback is written to the store before its first attempt (a `PendingCallback` record, its secret sealed), retried
// with backoff until delivered, refused or out of retries, and removed then; a server killed meanwhile delivers it
// after restart. It goes out through the outbound client (outbound/): a target the outbound rules close is never
// connected to, judged on the address actually dialled (a name's answer cannot change between check and use, an IP
// literal is judged too), and a redirect is not followed.
import type { Logger } from 'pino';
import { webhookHeaders } from '../../crypto/webhook-signature.js';
import { type Outbound, OutboundRefused } from '../../outbound/index.js';
import type { Resources } from '../../store/resources.js';
import type { ResourceKey } from '../../store/store.js';
import { EVERY_WORKSPACE } from '../../store/store.js';

export const CALLBACK_KIND = 'PendingCallback';
/** Retries when the trigger names none: a receiver restarting for a few seconds still gets the callback. */
export const DEFAULT_CALLBACK_RETRIES = 3;
/** First retry after this long, doubling: 1 s, 2 s, 4 s … */
export const CALLBACK_BACKOFF_MS = 1_000;
/** …up to this: a receiver down for long is tried every two minutes, not every hour. */
export const MAX_CALLBACK_BACKOFF_MS = 120_000;
/** A receiver slower than this is counted as failed for that attempt (Standard Webhooks: 15–30 s is the norm). */
export const CALLBACK_TIMEOUT_MS = 15_000;

/** One callback to send: `id` is the webhook-id, the same on every attempt (receivers deduplicate by it). */
export interface CallbackRequest {
  workspace: string;
  /** What sends it, e.g. `Job/nightly` (keeps ids of different objects apart). */
  owner: string;
  id: string;
  url: string;
  secret: string;
  body: string;
  retry?: number;
}

/** What a sender may watch while the callback is delivered (in this process; a restart forgets watchers). */
export interface CallbackState {
  delivered: boolean;
  attempts: number;
  lastStatus?: number;
  error?: string;
}

export interface CallbacksDeps {
  resources: Resources;
  logger?: Logger;
  /** The outbound client every callback is sent through. */
  outbound: Outbound;
  now?: () => number;
}

export class Callbacks {
  private readonly now: () => number;
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly watchers = new Map<string, (s: CallbackState) => void>();
  private stopped = false;

  constructor(private readonly deps: CallbacksDeps) {
    this.now = deps.now ?? Date.now;
  }

  /** Delivers what a previous run left pending. */
  async start(): Promise<void> {
    for (const o of await this.deps.resources.store.list({ workspace: EVERY_WORKSPACE, kind: CALLBACK_KIND }))
      this.schedule(o, Math.max(0, (o.body.nextAt ?? 0) - this.now()));
  }

  stop() {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  }

  /** Records the callback and sends it in the background; `watch` hears each attempt's outcome. */
  async send(req: CallbackRequest, watch?: (s: CallbackState) => void): Promise<void> {
    const key = { kind: CALLBACK_KIND, workspace: req.workspace, parent: req.owner, name: req.id };
    const body = {
      url: req.url,
      secret: this.deps.resources.sealSecret(req.secret),
      body: req.body,
      retry: req.retry ?? DEFAULT_CALLBACK_RETRIES,
      attempts: 0,
      nextAt: this.now(),
    };
    const have = await this.deps.resources.store.get(key);
    if (have) return; // the same webhook-id is already on its way
    await this.deps.resources.store.write([{ op: 'create', key, body }]);
    if (watch) this.watchers.set(watchKey(key), watch);
    this.schedule(key, 0);
  }

  /** Why a callback URL is refused before anything is sent (not http(s), or a closed address), or undefined. */
  async refusal(url: string): Promise<string | undefined> {
    const issue = await this.deps.outbound.urlIssue(url, 'callbackUrl');
    return issue && `callbackUrl ${issue.message}`;
  }

  private schedule(o: ResourceKey, delayMs: number) {
    if (this.stopped) return;
    const k = watchKey(o);
    clearTimeout(this.timers.get(k));
    const t = setTimeout(() => {
      this.timers.delete(k);
      const key = { kind: CALLBACK_KIND, workspace: o.workspace, parent: o.parent, name: o.name };
      void this.attempt(key).catch((err) =>
        this.deps.logger?.warn({ err, callback: o.name }, 'callback attempt failed'),
      );
    }, delayMs);
    t.unref();
    this.timers.set(k, t);
  }

  private async attempt(key: ResourceKey) {
    const store = this.deps.resources.store;
    const o = await store.get(key);
    if (!o || this.stopped) return;
    const rec = o.body;
    const state: CallbackState = { delivered: false, attempts: rec.attempts + 1 };
    let final = false;
    const origin = safeOrigin(rec.url);
    try {
      const ts = Math.floor(this.now() / 1000);
      const secret = this.deps.resources.openSecret(rec.secret);
      const res = await this.deps.outbound.fetch(rec.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...webhookHeaders(secret, key.name, ts, rec.body) },
        body: rec.body,
        redirect: 'manual',
        signal: AbortSignal.timeout(CALLBACK_TIMEOUT_MS),
      });
      await res.body?.cancel();
      state.lastStatus = res.status;
      state.delivered = res.status >= 200 && res.status < 300;
      // 410 Gone: the receiver asks never to be called again for this.
      final = state.delivered || res.status === 410;
      if (!state.delivered)
        this.deps.logger?.warn(
          { url: origin, status: res.status, attempt: state.attempts },
          'callback refused',
        );
    } catch (err) {
      const refused = (err as { cause?: unknown }).cause ?? err;
      state.error = refused instanceof Error ? refused.message : String(err);
      final = refused instanceof OutboundRefused;
      this.deps.logger?.warn(
        { url: origin, attempt: state.attempts, reason: state.error },
        'callback failed',
      );
    }
    if (state.attempts > rec.retry) final = true;
    this.watchers.get(watchKey(key))?.(state);
    if (final) {
      this.watchers.delete(watchKey(key));
      await store.write([{ op: 'delete', key }]).catch(() => undefined);
      if (!state.delivered)
        this.deps.logger?.warn({ callback: key.name, url: origin }, 'callback not delivered');
      return;
    }
    const backoff = Math.min(MAX_CALLBACK_BACKOFF_MS, CALLBACK_BACKOFF_MS * 2 ** (state.attempts - 1));
    const nextAt = this.now() + backoff;
    await store.write([{ op: 'update', key, body: { ...rec, attempts: state.attempts, nextAt } }]);
    this.schedule(key, backoff);
  }
}

const watchKey = (k: ResourceKey) => [k.workspace, k.parent, k.name].join('\u0000');

/** The URL without path or query (which may hold a token) for logs. */
function safeOrigin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'invalid URL';
  }
}
