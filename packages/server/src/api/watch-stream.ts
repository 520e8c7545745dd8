// One watch, whatever its wire format (the console's Server-Sent Events of GET /v0/watch, api/watch.ts; `?watch=true`
// on a kind's list or one object, NDJSON, api/list-watch.ts): the store's own change feed — the one every controller
// reacts to — kept to what one read may see, after that read's objects.
// - Subscribed before the read, so no change between the read and the first event is lost; a change the read already
//   shows (by the store's version of the object) is dropped.
// - Each change is sent only once the caller's credential is resolved again (a cached lookup, dropped on any identity
//   change), in commit order: a revoked key or a removed member sees nothing written after that.
// - A quiet stream gets a heartbeat, which checks the credential too; a reader more than WATCH_MAX_BUFFERED behind is
//   cut off (it watches again); a workspace holds at most WATCH_MAX_PER_WORKSPACE watches open.
import { PassThrough } from 'node:stream';
import { ApiError } from '../errors.js';
import { type Change, keyString, type Store, type StoredObject } from '../store/store.js';

/** A heartbeat this often: proxies commonly cut a connection idle for 30–60 s, and the credential is checked again. */
export const WATCH_HEARTBEAT_MS = 15_000;
/** Open watches per workspace: each holds a store watcher and a socket. */
export const WATCH_MAX_PER_WORKSPACE = 64;
/** A client that reads slower than changes come is cut off past this many unread bytes (it reconnects and lists). */
export const WATCH_MAX_BUFFERED = 4 * 1024 * 1024;

/** The wire format's lines. `change` answers undefined for a change the format does not send. */
export interface WatchFrames {
  change(type: Change['type'], object: StoredObject, seq: number): string | undefined;
  synced(): string;
  heartbeat(): string;
  refused(detail: string): string;
}

export interface WatchSpec {
  store: Store;
  workspace: string;
  /** Which objects of the feed belong to this watch (kind, parent, name, labels: the read's own scope). */
  inScope(o: StoredObject): boolean;
  /** The objects there when the watch begins, as the read it extends shows them. */
  initial(): Promise<StoredObject[]>;
  frames: WatchFrames;
  /** Whether the caller may still read this workspace. */
  stillAllowed(): Promise<boolean>;
  /** false: the initial objects and the SYNCED line only, then the end (a list in one request). */
  follow: boolean;
  /** A watch of one object ends with the change that deletes it. */
  oneObject?: boolean;
}

/** Counts open watches per workspace (one per server, shared by every wire format). */
export class WatchLimit {
  private readonly open = new Map<string, number>();

  enter(workspace: string): void {
    if ((this.open.get(workspace) ?? 0) >= WATCH_MAX_PER_WORKSPACE)
      throw new ApiError(
        'RATE_LIMITED',
        `workspace ${workspace} already has ${WATCH_MAX_PER_WORKSPACE} watches open; close one first`,
        { headers: { 'retry-after': '5' } },
      );
    this.open.set(workspace, (this.open.get(workspace) ?? 0) + 1);
  }

  leave(workspace: string): void {
    const n = (this.open.get(workspace) ?? 1) - 1;
    if (n > 0) this.open.set(workspace, n);
    else this.open.delete(workspace);
  }
}

/**
 * Starts a watch; the route answers with the stream it returns (Fastify sends it as it is written) and calls the
 * returned `close` when the client goes. Throws before anything is written when the workspace has too many open.
 */
export async function startWatch(
  spec: WatchSpec,
  limit: WatchLimit,
): Promise<{ out: PassThrough; close: () => void }> {
  const { store, frames } = spec;
  if (spec.follow) limit.enter(spec.workspace);
  const out = new PassThrough();
  let ended = false;
  let held: Change[] | undefined = [];
  const shown = new Map<string, number>();
  let chain = Promise.resolve();
  let heartbeat: NodeJS.Timeout | undefined;

  const close = () => {
    if (ended) return;
    ended = true;
    unwatch();
    clearInterval(heartbeat);
    if (spec.follow) limit.leave(spec.workspace);
    out.end();
  };
  const write = (text: string) => {
    if (ended) return;
    out.write(text);
    if (out.writableLength > WATCH_MAX_BUFFERED) close();
  };
  /** Runs after everything queued before it, once the credential still holds; ends the stream otherwise. */
  const whenAllowed = (then: () => void) => {
    chain = chain.then(async () => {
      if (ended) return;
      if (await spec.stillAllowed().catch(() => false)) then();
      else {
        write(frames.refused('the credential is no longer valid for this workspace'));
        close();
      }
    });
  };
  const send = (c: Change) => {
    const text = frames.change(c.type, c.object, c.seq);
    whenAllowed(() => {
      if (text) write(text);
      if (spec.oneObject && c.type === 'DELETED') close();
    });
  };
  const unwatch = spec.follow
    ? store.watch((c) => {
        if (ended || c.object.workspace !== spec.workspace || !spec.inScope(c.object)) return;
        if (held) held.push(c);
        else send(c);
      })
    : () => undefined;

  try {
    for (const o of await spec.initial()) {
      shown.set(keyString(o), o.resourceVersion);
      const text = frames.change('ADDED', o, o.resourceVersion);
      if (text) write(text);
    }
  } catch (err) {
    close();
    throw err;
  }
  const waiting = held;
  held = undefined;
  for (const c of waiting)
    if (c.type === 'DELETED' || c.object.resourceVersion > (shown.get(keyString(c.object)) ?? 0)) send(c);
  chain = chain.then(() => write(frames.synced()));
  if (!spec.follow) chain.then(close);
  else {
    heartbeat = setInterval(() => whenAllowed(() => write(frames.heartbeat())), WATCH_HEARTBEAT_MS);
    heartbeat.unref();
  }
  return { out, close };
}
