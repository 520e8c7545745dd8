// On a server of a cluster that does not lead the controllers: the apps the leader built, built here too, ahead of
// need (docs/decisions/067-builds-ahead.md). Agents, functions and jobs run on the leader; when it dies, the server
// that takes the lead finds each app already built in its own data dir (the same `Builder.keyOf` key of the same
// workspace, source digest and base image), so its reconcilers and job runner start replicas and tasks at once
// instead of building first.
//
// A follower only builds, from its own copy of the source (builds/code-copies.ts), once the copy is there: one build
// at a time, never in a reconcile slot, and only what the leader already built (an object BUILT, DEPLOYING or
// DEPLOYED, and the revisions it serves), so it never competes with a build the leader is still making nor repeats one
// that failed there. It writes nothing to the store: objects' status and events are the leader's alone. A failed
// build here is logged and tried again later (backoff). Built apps live where the leader's do, in the workspace's
// own folder (builds/layout.ts), and go as theirs do: with the workspace.
import type { Logger } from 'pino';
import { type BaseImage, BaseImageError, type Builder } from '../../builds/builder.js';
import { CODE_KINDS } from '../../builds/code-copies.js';
import type { CodeStore } from '../../builds/code-store.js';
import { isGone } from '../../kinds/status.js';
import { EVERY_WORKSPACE, type Store, type StoredObject } from '../../store/store.js';
import { enabled, type RevisionRecord } from './source.js';

/** Statuses after which the leader has built the object's current source. */
const BUILT_BY_LEADER = new Set(['BUILT', 'DEPLOYING', 'DEPLOYED']);
/** First wait after a failed build here, doubled after each further failure up to MAX_BACKOFF_MS. */
const FIRST_BACKOFF_MS = 5_000;
const MAX_BACKOFF_MS = 10 * 60_000;

/** `copied`: the app came from a node holding it (decision 094) rather than a build here. */
export type AheadOutcome = 'built' | 'copied' | 'failed';

export interface BuildsAheadDeps {
  store: Store;
  builder: Pick<Builder, 'baseImage' | 'keyOf' | 'builtByKey' | 'build'>;
  code: Pick<CodeStore, 'has'>;
  /** Whether this server leads the controllers now: its reconcilers build, this loop does nothing. */
  leads: () => boolean;
  logger?: Logger;
  /** Told of each build this loop ended (the /metrics counter). */
  counted?: (outcome: AheadOutcome) => void;
  /** How often the loop looks for the next build (a copy arrived, a backoff ended). */
  tickMs?: number;
  firstBackoffMs?: number;
  now?: () => number;
}

/** One app to have built here: what Builder.build takes, and the object that owns the build's instances. */
interface Wanted {
  workspace: string;
  kind: string;
  name: string;
  digest: string;
  base?: BaseImage;
  key: string;
  /** The archive digest a revision recorded for it (a copy must have it). */
  appDigest?: string;
}

const objectId = (o: StoredObject) => `${o.kind}\0${o.workspace}\0${o.name}`;

export class BuildsAhead {
  /** The apps each object of a code kind wants built, by object. */
  private readonly wanted = new Map<string, Wanted[]>();
  /** Builds that failed here: `<workspace>/<key>` → failures so far and when to try again. */
  private readonly failed = new Map<string, { count: number; notBefore: number }>();
  private readonly stop = new AbortController();
  private running?: Promise<void>;
  private unwatch?: () => void;
  private timer?: NodeJS.Timeout;
  private readonly now: () => number;

  constructor(private readonly deps: BuildsAheadDeps) {
    this.now = deps.now ?? Date.now;
  }

  async start(): Promise<void> {
    this.unwatch = this.deps.store.watch((c) => {
      if (!CODE_KINDS.includes(c.object.kind)) return;
      try {
        if (c.type === 'DELETED') this.wanted.delete(objectId(c.object));
        else this.want(c.object);
        this.next();
      } catch (err) {
        this.deps.logger?.warn({ err, name: c.object.name }, 'could not look at an object to build ahead');
      }
    });
    for (const kind of CODE_KINDS)
      for (const o of await this.deps.store.list({ workspace: EVERY_WORKSPACE, kind })) this.want(o);
    this.timer = setInterval(() => this.next(), this.deps.tickMs ?? 1_000);
    this.timer.unref();
    this.next();
  }

  /** Stops the build under way here (a server stopping) and waits for it. */
  async close(): Promise<void> {
    this.unwatch?.();
    if (this.timer) clearInterval(this.timer);
    this.stop.abort(new Error('the server is stopping'));
    await this.running;
  }

  /** What the leader built for `o` that this server should build too (nothing for an object it would not run). */
  private want(o: StoredObject): void {
    const id = objectId(o);
    this.wanted.delete(id);
    if (isGone(o) || !enabled(o) || o.body.status === 'FAILED') return;
    let base: BaseImage | undefined;
    try {
      base = this.deps.builder.baseImage(o.workspace, o.body.spec?.runtime?.image);
    } catch (err) {
      // An image the workspace holds on the leader only (images are not shared across nodes, decision 059).
      if (err instanceof BaseImageError) return;
      throw err;
    }
    const out: Wanted[] = [];
    const add = (digest: string | undefined, key?: string, appDigest?: string) => {
      if (!digest) return;
      const k = this.deps.builder.keyOf(o.workspace, digest, base);
      // A revision built on another base image than the spec names now: its base is not known here.
      if ((key && key !== k) || out.some((w) => w.key === k)) return;
      out.push({ workspace: o.workspace, kind: o.kind, name: o.name, digest, base, key: k, appDigest });
    };
    // The revisions it serves first (a new leader starts them), then its current source once the leader built it.
    const revisions: RevisionRecord[] = o.body.revisions ?? [];
    for (const id of [o.body.activeRevision, o.body.canaryRevision]) {
      const rec = id ? revisions.find((r) => r.id === id) : undefined;
      if (rec) add(rec.source, rec.app, rec.appDigest);
    }
    if (BUILT_BY_LEADER.has(o.body.status)) add(o.body.source?.digest);
    if (out.length) this.wanted.set(id, out);
  }

  /** Starts the next build wanted, if none runs and this server does not lead. */
  private next(): void {
    if (this.running || this.stop.signal.aborted || this.deps.leads()) return;
    const w = this.pick();
    if (!w) return;
    this.running = this.build(w).finally(() => {
      this.running = undefined;
      this.next();
    });
  }

  private pick(): Wanted | undefined {
    const now = this.now();
    for (const list of this.wanted.values())
      for (const w of list) {
        const f = this.failed.get(`${w.workspace}/${w.key}`);
        if (f && f.notBefore > now) continue;
        if (!this.deps.code.has(w.workspace, w.digest)) continue;
        if (this.deps.builder.builtByKey(w.workspace, w.key)) continue;
        return w;
      }
    return undefined;
  }

  private async build(w: Wanted): Promise<void> {
    const { logger } = this.deps;
    const at = { workspace: w.workspace, kind: w.kind, name: w.name, key: w.key };
    try {
      const app = await this.deps.builder.build(
        w.workspace,
        w.digest,
        this.stop.signal,
        w.base,
        { kind: w.kind, name: w.name },
        { digest: w.appDigest },
      );
      this.failed.delete(`${w.workspace}/${w.key}`);
      this.deps.counted?.(app?.copiedFrom ? 'copied' : 'built');
      logger?.info(
        { ...at, ...(app?.copiedFrom ? { from: app.copiedFrom } : {}) },
        app?.copiedFrom
          ? 'copied ahead: this server can take the lead without building it'
          : 'built ahead: this server can take the lead without building it',
      );
    } catch (err) {
      if (this.stop.signal.aborted) return;
      const count = (this.failed.get(`${w.workspace}/${w.key}`)?.count ?? 0) + 1;
      const wait = Math.min(
        (this.deps.firstBackoffMs ?? FIRST_BACKOFF_MS) * 2 ** (count - 1),
        MAX_BACKOFF_MS,
      );
      this.failed.set(`${w.workspace}/${w.key}`, { count, notBefore: this.now() + wait });
      this.deps.counted?.('failed');
      logger?.warn({ ...at, err, retryInMs: wait }, 'a build ahead failed; trying again later');
    }
  }
}
