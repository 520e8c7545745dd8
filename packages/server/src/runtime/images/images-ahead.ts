// Images ahead (docs/decisions/087-images-ahead.md): in a cluster, every node holds every workspace image, so that an
// image acknowledged to its user survives the death of the server that received it (the leader: every image route
// is served there), and a new leader serves the images it copied. In the spirit of builds ahead (067):
//   - a node that does not lead reads the leader's catalog (`GET /peer/images`: every workspace's names, and the
//     names let go of) every second, copies each image it lacks from the leader or any node holding it (peer-images.ts:
//     digest-verified, the peer token, keyed by workspace), one at a time, backing off on failure; and lets go here of
//     each name the leader let go of (a delete, a tag moved), so deleting an image removes it from every node;
//   - the leader reads every other node's catalog and copies what a node holds that it lacks and never let go of: the
//     images a dead leader acknowledged that only a follower copied before it died.
// Names of built apps (`berth-builds/…`) are not copied: every node builds its own (builds ahead, 067).
// The leader also keeps the names let go of in the database (`GoneRecord`), and a node that takes the lead lets go of
// those before anything else: a node that returns and leads alone learns the deletes made while it was away.
import type { Logger } from 'pino';
import { PEER_TOKEN_HEADER } from '../../crypto/peer-token.js';
import type { ImageCatalog, ImageStore } from './image-store.js';
import type { ImageHolder, PeerImages } from './peer-images.js';

/** How often a node compares its images with the leader's (and the leader with the others', ADOPT_EVERY times that). */
const EVERY_MS = 1_000;
const ADOPT_EVERY = 3;
/** A copy that failed is tried again after this, doubling up to MAX_BACKOFF_MS. */
const FIRST_BACKOFF_MS = 1_000;
const MAX_BACKOFF_MS = 5 * 60_000;
const CATALOG_TIMEOUT_MS = 10_000;
/** How often a write waiting for its second copy (or a delete for the others to let go) asks the others. */
const SECOND_COPY_POLL_MS = 100;
/** Names of apps built from a Dockerfile (builds/dockerfile/workload.ts): each node builds its own. */
const BUILT_APPS = 'docker.io/berth-builds/';

export type AheadOutcome = 'copied' | 'failed' | 'removed';

/**
 * The names let go of, kept where every node finds them whoever led when they went (the database in a cluster): the
 * leader writes each workspace's as its store has them; a node taking the lead reads them all first.
 */
export interface GoneRecord {
  /** Every workspace's names let go of (`<name> <id hex>` → when), as the leaders wrote them. */
  read(): Promise<ImageCatalog['gone']>;
  /** Records `workspace`'s names let go of, replacing what was recorded for it (an empty map deletes it). */
  write(workspace: string, gone: Record<string, string>): Promise<void>;
}

export interface ImagesAheadDeps {
  images: ImageStore;
  peerImages: PeerImages;
  /** This cluster's peer token. */
  token: string;
  /** Where the workspaces' images are written: here (this server leads), the leader, or nowhere now. */
  holder: ImageHolder;
  /** The peer addresses of the other healthy nodes. */
  peers: () => Promise<URL[]>;
  workspaceExists: (workspace: string) => Promise<boolean>;
  logger?: Logger;
  counted?: (outcome: AheadOutcome) => void;
  everyMs?: number;
  /** Where the names let go of are kept for the next leader; none: only in each node's store (and catalog). */
  goneRecord?: GoneRecord;
}

/** Whether this store holds `workspace`'s name for the image `id` (hex); a name it cannot read, as held. */
function holding(images: ImageStore, workspace: string, name: string, id: string): boolean {
  try {
    return images.find(workspace, name)?.id === `sha256:${id}`;
  } catch {
    return true;
  }
}

/** Whether the leader lacks `workspace`'s name and never let go of it standing for `id` (its own name wins). */
function wantedByLeader(images: ImageStore, workspace: string, name: string, id: string): boolean {
  try {
    return !images.isGone(workspace, name, id) && images.namesFor(workspace, name).length === 0;
  } catch {
    return false;
  }
}

/** An image this node lacks: its workspace's names for it, and where it was seen. */
interface Wanted {
  workspace: string;
  id: string;
  names: string[];
  sources: URL[];
}

export class ImagesAhead {
  private timer?: NodeJS.Timeout;
  private running = false;
  private ticks = 0;
  private failing = false;
  /** Catalogs read last, by peer address (an unchanged one is a 304). */
  private readonly seen = new Map<string, { etag: string }>();
  /** Copies that failed: `<workspace>\0<id>` → tries and when to try again. */
  private readonly backoff = new Map<string, { tries: number; at: number }>();
  /** Leading, and the record of names let go of read since taking the lead (nothing is written to it before). */
  private recordRead = false;
  /** Workspaces whose images were written here since this node took the lead (secondCopy, letGo). */
  private readonly touched = new Set<string>();
  /** Entries of the record not applied yet (a sandbox here runs on the image): kept in what is written back. */
  private readonly unapplied = new Map<string, Record<string, string>>();
  /** What was last written to the record, by workspace (JSON), so only a change is written. */
  private readonly recorded = new Map<string, string>();
  /** Writes to the record, one at a time. */
  private recording: Promise<unknown> = Promise.resolve();

  constructor(private readonly deps: ImagesAheadDeps) {}

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.deps.everyMs ?? EVERY_MS);
    this.timer.unref();
    // The leader tells the others when it wrote an image, so they need not wait for their next pass.
    this.deps.peerImages.onNudge = () => void this.tick();
  }

  /**
   * Leading: waits until another healthy node holds what each of `refs` (image ids and names) stands for in
   * `workspace`, at most `boundMs` (after telling the others to look now; a node that does not copy ahead is not
   * waited for). How many nodes hold them all, this one counted; 1 when no other node is live or none copied them in
   * time. Not leading: undefined (the images are written where the leader is).
   */
  async secondCopy(workspace: string, refs: string[], boundMs: number): Promise<number | undefined> {
    if (!('here' in this.deps.holder())) return undefined;
    // A name bound again is no longer gone: the record says so before the write is answered.
    this.touched.add(workspace);
    await this.recordNow(workspace);
    if (boundMs <= 0) return 1;
    const peers = await this.nudged();
    if (!peers.length) return 1;
    const held = await this.waitFor(
      peers,
      boundMs,
      async (p) => {
        for (const ref of refs) if ((await this.resolves(p, workspace, ref)) !== true) return false;
        return true;
      },
      (n) => n > 0,
    );
    return held + 1;
  }

  /**
   * Leading: waits until no other node that copies ahead still holds any of `workspace`'s `names` just let go of
   * here, at most `boundMs`: a delete is acknowledged once a new leader cannot bring the names back. How many other
   * nodes still hold one (0 once all let go); undefined when not leading or not waiting.
   */
  async letGo(workspace: string, names: string[], boundMs: number): Promise<number | undefined> {
    if (!('here' in this.deps.holder())) return undefined;
    // Recorded before the delete is answered: a node that returns and leads alone lets go of them too.
    this.touched.add(workspace);
    await this.recordNow(workspace);
    if (boundMs <= 0 || !names.length) return undefined;
    const peers = await this.nudged();
    if (!peers.length) return 0;
    return this.waitFor(
      peers,
      boundMs,
      async (p) => {
        // A peer that cannot be asked counts as holding: nothing says it let go.
        for (const name of names) if ((await this.resolves(p, workspace, name)) !== false) return true;
        return false;
      },
      (n) => n === 0,
    );
  }

  /** Records `workspace`'s names let go of for a write about to be answered; a failure is logged, not the write's. */
  private async recordNow(workspace: string): Promise<void> {
    await this.record([workspace]).catch((err) =>
      this.deps.logger?.warn({ err, workspace }, 'images ahead: could not record the names let go of'),
    );
  }

  /** Tells the others that copy ahead to look now; those that answered (a node that does not copy ahead: 404). */
  private async nudged(): Promise<URL[]> {
    const headers = { [PEER_TOKEN_HEADER]: this.deps.token };
    const nudge = async (p: URL) => {
      const r = await fetch(new URL('/peer/images/ahead', p), {
        method: 'POST',
        headers,
        signal: AbortSignal.timeout(2_000),
      }).catch(() => undefined);
      await r?.body?.cancel();
      return r?.status === 204 ? p : undefined;
    };
    return (await Promise.all((await this.deps.peers()).map(nudge))).filter((p): p is URL => p !== undefined);
  }

  /** Whether `p` holds what `ref` stands for in `workspace`; undefined when it did not say (down, timed out). */
  private async resolves(p: URL, workspace: string, ref: string): Promise<boolean | undefined> {
    const url = new URL(`/peer/images/${workspace}/resolve`, p);
    url.searchParams.set('name', ref);
    const r = await fetch(url, {
      headers: { [PEER_TOKEN_HEADER]: this.deps.token },
      signal: AbortSignal.timeout(2_000),
    }).catch(() => undefined);
    await r?.body?.cancel();
    return r?.status === 200 ? true : r?.status === 404 ? false : undefined;
  }

  /** Polls `count` over the peers until `done` says so of how many answered true, or `boundMs` passed; that count. */
  private async waitFor(
    peers: URL[],
    boundMs: number,
    count: (p: URL) => Promise<boolean>,
    done: (n: number) => boolean,
  ): Promise<number> {
    const until = Date.now() + boundMs;
    for (;;) {
      const n = (await Promise.all(peers.map(count))).filter(Boolean).length;
      if (done(n) || Date.now() >= until) return n;
      await new Promise((r) => setTimeout(r, SECOND_COPY_POLL_MS));
    }
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.deps.peerImages.onNudge = undefined;
  }

  /** One pass: compare with the leader (or, leading, with the others) and copy what is missing. */
  async tick(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      const where = this.deps.holder();
      if ('here' in where) {
        if (!this.recordRead) await this.record(); // taking the lead: read first
        if (this.ticks++ % ADOPT_EVERY === 0) {
          await this.adopt();
          await this.record();
        }
      } else {
        this.recordRead = false;
        this.touched.clear();
        if ('peer' in where) await this.follow(where.peer);
      }
      this.failing = false;
    } catch (err) {
      // Once per run of failures (a leader that died is asked each second until the next one is listed).
      if (!this.failing)
        this.deps.logger?.warn({ err }, 'images ahead: a pass failed; trying again each second');
      this.failing = true;
    } finally {
      this.running = false;
    }
  }

  /**
   * Lets go here of every name the record says was let go of: deletes made while this node was away, by a leader that
   * may be gone now. Run at the server's start (before it serves anything) and each time this node takes the lead
   * (then skipping the workspaces it has written images of since: its own word is newer). Until it has run as leader,
   * nothing is written to the record (this store's own names let go of may be older).
   */
  async applyRecord(): Promise<void> {
    const { goneRecord } = this.deps;
    if (!goneRecord) return;
    const all = await goneRecord.read();
    this.unapplied.clear();
    this.recorded.clear();
    for (const [ws, gone] of Object.entries(all)) {
      this.recorded.set(ws, JSON.stringify(sorted(gone)));
      if (this.touched.has(ws) || !(await this.deps.workspaceExists(ws))) continue;
      const left = this.applyGone(ws, gone);
      if (Object.keys(left).length) this.unapplied.set(ws, left);
    }
  }

  /**
   * This server has just taken the lead: the record is read and applied now (its image routes take writes from now
   * on), then written back as this store holds it.
   */
  async tookLead(): Promise<void> {
    this.recordRead = false;
    await this.record();
  }

  /** Lets go here of `workspace`'s names in `gone`; those that must wait (a sandbox here runs on the image). */
  private applyGone(ws: string, gone: Record<string, string>): Record<string, string> {
    const { images } = this.deps;
    const left: Record<string, string> = {};
    for (const [key, at] of Object.entries(gone)) {
      const [name, id] = key.split(' ');
      if (!name || !id) continue;
      try {
        const had = images.find(ws, name)?.id === `sha256:${id}`;
        if (!images.letGo(ws, name, id, at)) left[key] = at;
        else if (had) this.deps.counted?.('removed');
      } catch (err) {
        this.deps.logger?.warn(
          { err, workspace: ws, name },
          'images ahead: a name let go of was not understood',
        );
      }
    }
    return left;
  }

  /**
   * Leading: writes the names let go of of `workspaces` (every workspace, when not given) to the record, as this
   * store holds them (with the record's entries still waiting to be applied here); only what changed. The first
   * write since this node took the lead reads and applies the record first.
   */
  private record(workspaces?: string[]): Promise<void> {
    const next = this.recording.then(async () => {
      const { goneRecord, images } = this.deps;
      if (!goneRecord || !('here' in this.deps.holder())) return;
      if (!this.recordRead) {
        await this.applyRecord();
        this.recordRead = true;
      }
      for (const [ws, left] of [...this.unapplied]) {
        const still = this.applyGone(ws, left);
        if (Object.keys(still).length) this.unapplied.set(ws, still);
        else this.unapplied.delete(ws);
      }
      const { gone } = images.catalog();
      const list = workspaces ?? [
        ...new Set([...Object.keys(gone), ...this.recorded.keys(), ...this.unapplied.keys()]),
      ];
      for (const ws of list) {
        const now = sorted({ ...this.unapplied.get(ws), ...gone[ws] });
        const text = JSON.stringify(now);
        if ((this.recorded.get(ws) ?? '{}') === text) continue;
        await goneRecord.write(ws, now);
        if (text === '{}') this.recorded.delete(ws);
        else this.recorded.set(ws, text);
      }
    });
    this.recording = next.catch(() => undefined);
    return next;
  }

  /** Not leading: hold what the leader holds, and let go of what it let go of. */
  private async follow(leader: URL): Promise<void> {
    const { images } = this.deps;
    const catalog = await this.catalogOf(leader);
    if (!catalog) return;
    let retry = false;
    for (const [ws, gone] of Object.entries(catalog.gone))
      if (Object.keys(this.applyGone(ws, gone)).length) retry = true; // a sandbox here runs on one: later
    const others = (await this.deps.peers()).filter((p) => p.href !== leader.href);
    const wanted = new Map<string, Wanted>();
    for (const [ws, names] of Object.entries(catalog.names))
      for (const [name, id] of Object.entries(names)) {
        if (name.startsWith(BUILT_APPS) || holding(images, ws, name, id)) continue;
        const key = `${ws}\0${id}`;
        const w = wanted.get(key) ?? { workspace: ws, id, names: [], sources: [leader, ...others] };
        w.names.push(name);
        wanted.set(key, w);
      }
    if (!(await this.copyAll(wanted)) || retry) this.seen.delete(leader.href); // read it whole next time
  }

  /**
   * Leading: what another node holds that this one lacks and never let go of (a dead leader's image only a follower
   * had copied) is copied here, so the catalog the others follow has it again.
   */
  private async adopt(): Promise<void> {
    const { images } = this.deps;
    const wanted = new Map<string, Wanted>();
    const unsure: string[] = [];
    for (const peer of await this.deps.peers()) {
      const catalog = await this.catalogOf(peer).catch(() => undefined);
      if (!catalog) continue;
      for (const [ws, names] of Object.entries(catalog.names))
        for (const [name, id] of Object.entries(names)) {
          if (name.startsWith(BUILT_APPS) || !wantedByLeader(images, ws, name, id)) continue;
          const key = `${ws}\0${id}`;
          const w = wanted.get(key) ?? { workspace: ws, id, names: [], sources: [] };
          if (!w.names.includes(name)) w.names.push(name);
          if (!w.sources.includes(peer)) w.sources.push(peer);
          wanted.set(key, w);
          unsure.push(peer.href);
        }
    }
    if (!(await this.copyAll(wanted))) for (const p of unsure) this.seen.delete(p);
  }

  /** Copies each wanted image, one at a time (the lowest priority: nothing waits on it). False if any is still due. */
  private async copyAll(wanted: Map<string, Wanted>): Promise<boolean> {
    let all = true;
    for (const [key, w] of wanted) {
      const b = this.backoff.get(key);
      if (b && b.at > Date.now()) {
        all = false;
        continue;
      }
      try {
        if (!(await this.deps.workspaceExists(w.workspace))) continue;
        const copied = await this.deps.peerImages.copyAhead(
          w.workspace,
          `sha256:${w.id}`,
          w.names,
          w.sources,
        );
        if (!copied) throw new Error('no node holds it now');
        // Deleted while the copy travelled: what that deletion removed must not come back for a new workspace of
        // the same name to find.
        if (!(await this.deps.workspaceExists(w.workspace))) this.deps.images.forgetWorkspace(w.workspace);
        this.backoff.delete(key);
        this.deps.counted?.('copied');
      } catch (err) {
        all = false;
        const tries = (b?.tries ?? 0) + 1;
        const wait = Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** (tries - 1));
        this.backoff.set(key, { tries, at: Date.now() + wait });
        this.deps.counted?.('failed');
        this.deps.logger?.warn(
          { err, workspace: w.workspace, image: `sha256:${w.id}`, names: w.names, retryInMs: wait },
          'images ahead: could not copy an image; trying again later',
        );
      }
    }
    return all;
  }

  /**
   * `peer`'s catalog; undefined when it answers that nothing changed since the last one read (which was settled: one
   * that left something to do is forgotten, so it is read and gone through again).
   */
  private async catalogOf(peer: URL): Promise<ImageCatalog | undefined> {
    const last = this.seen.get(peer.href);
    const r = await fetch(new URL('/peer/images', peer), {
      headers: {
        [PEER_TOKEN_HEADER]: this.deps.token,
        ...(last ? { 'if-none-match': last.etag } : {}),
      },
      signal: AbortSignal.timeout(CATALOG_TIMEOUT_MS),
    });
    if (r.status === 304 && last) return undefined;
    if (!r.ok) {
      await r.body?.cancel();
      throw new Error(`${peer.host} answered ${r.status} for its image catalog`);
    }
    const catalog = (await r.json()) as ImageCatalog;
    if (typeof catalog?.names !== 'object' || typeof catalog?.gone !== 'object')
      throw new Error(`${peer.host} sent an image catalog of another shape`);
    const etag = r.headers.get('etag');
    if (etag) this.seen.set(peer.href, { etag });
    return catalog;
  }
}

const sorted = (o: Record<string, string>) =>
  Object.fromEntries(Object.entries(o).sort(([a], [b]) => a.localeCompare(b)));
