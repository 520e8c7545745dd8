// In a cluster, the code a workspace uploaded (or cloned) lands on the server that received it, the leader; every other
// server copies it from a peer as soon as the change feed shows an object naming it, so that whichever server leads
// next can build it again (docs/decisions/063-cluster-flows.md). Without the copies, a kill -9 of the leader took the
// only copy with it: its agents, functions and jobs could not be built again, and stayed down.
//
// Copies travel between servers on `GET /peer/code/<workspace>/<digest>`, answered only to a caller showing the
// cluster's peer token (derived from the master key every server shares: no tenant holds it), and checked against
// their digest on arrival. Each copy is kept in its workspace's own folder (code-store.ts), as an upload is.
import { createReadStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { K } from '../auth/records.js';
import { PEER_TOKEN_HEADER, showsPeerToken } from '../crypto/peer-token.js';
import { notFound } from '../errors.js';
import { WORKLOAD_READ_ONLY } from '../kinds/agent.js';
import { NAME_PATTERN } from '../kinds/common.js';
import { KINDS } from '../kinds/index.js';
import { EVERY_WORKSPACE, type Store, type StoredObject } from '../store/store.js';
import type { CodeStore } from './code-store.js';

/** The kinds built from code: their records carry a source and revisions. */
export const CODE_KINDS = KINDS.filter((k) => k.readOnly === WORKLOAD_READ_ONLY).map((k) => k.kind);

const DIGEST = /^sha256:[0-9a-f]{64}$/;
const WORKSPACE = new RegExp(NAME_PATTERN);
export { PEER_TOKEN_HEADER, peerToken } from '../crypto/peer-token.js';
/** How often sources no peer could give yet are asked for again, and how many times before giving up. */
const RETRY_MS = 2_000;
const MAX_TRIES = 30;

/** The sources a record of a code kind names: its current one and its kept revisions'. */
export function sourceDigests(body: StoredObject['body']): string[] {
  return [
    ...new Set(
      [body.source?.digest, ...(body.revisions ?? []).map((r: { source?: string }) => r.source)].filter(
        (d): d is string => typeof d === 'string' && DIGEST.test(d),
      ),
    ),
  ];
}

export interface CodeCopiesDeps {
  store: Store;
  code: CodeStore;
  /** This cluster's peer token (peerToken of the master key). */
  token: string;
  /** Addresses of the other healthy servers. */
  peers: () => Promise<string[]>;
  logger?: Logger;
}

export class CodeCopies {
  /** Sources wanted here and not had yet: `<workspace>/<digest>` → tries so far. */
  private readonly wanted = new Map<string, number>();
  private readonly fetching = new Set<string>();
  private unwatch?: () => void;
  private timer?: NodeJS.Timeout;

  constructor(private readonly deps: CodeCopiesDeps) {}

  /** The peer route: a source of a workspace, to a server of the cluster. */
  register(app: FastifyInstance) {
    app.get('/peer/code/:workspace/:digest', async (req: FastifyRequest, reply: FastifyReply) => {
      // One answer for a wrong token and an unknown source: the route tells a stranger nothing.
      const { workspace, digest } = req.params as { workspace: string; digest: string };
      if (
        !showsPeerToken(req.headers, this.deps.token) ||
        !WORKSPACE.test(workspace) ||
        !DIGEST.test(digest) ||
        !this.deps.code.has(workspace, digest)
      )
        throw notFound('source');
      reply.header('content-type', 'application/zip');
      return reply.send(createReadStream(this.deps.code.pathOf(workspace, digest)));
    });
  }

  /** Asks for every source the store names that this server lacks, then for each new one the feed shows. */
  async start(): Promise<void> {
    this.unwatch = this.deps.store.watch((c) => {
      if (c.type !== 'DELETED' && CODE_KINDS.includes(c.object.kind)) this.want(c.object);
      // A deleted workspace's sources are no longer wanted (its folder goes: main.ts).
      if (c.type === 'DELETED' && c.object.kind === K.workspace)
        for (const id of this.wanted.keys()) if (id.startsWith(`${c.object.name}/`)) this.wanted.delete(id);
    });
    for (const kind of CODE_KINDS)
      for (const o of await this.deps.store.list({ workspace: EVERY_WORKSPACE, kind })) this.want(o);
    this.timer = setInterval(() => {
      for (const id of this.wanted.keys()) void this.copy(id);
    }, RETRY_MS);
    this.timer.unref();
  }

  close(): void {
    this.unwatch?.();
    if (this.timer) clearInterval(this.timer);
  }

  private want(o: StoredObject) {
    for (const digest of sourceDigests(o.body)) {
      if (this.deps.code.has(o.workspace, digest)) continue;
      const id = `${o.workspace}/${digest}`;
      if (!this.wanted.has(id)) this.wanted.set(id, 0);
      void this.copy(id);
    }
  }

  private async copy(id: string) {
    if (this.fetching.has(id)) return;
    const [workspace, digest] = id.split('/');
    if (this.deps.code.has(workspace, digest)) {
      this.wanted.delete(id);
      return;
    }
    this.fetching.add(id);
    try {
      for (const peer of await this.deps.peers()) {
        const r = await fetch(`${peer}/peer/code/${workspace}/${digest}`, {
          headers: { [PEER_TOKEN_HEADER]: this.deps.token },
          signal: AbortSignal.timeout(60_000),
        }).catch(() => undefined);
        if (!r?.ok || !r.body) {
          await r?.body?.cancel();
          continue;
        }
        const got = await this.deps.code.put(workspace, Readable.fromWeb(r.body as WebReadableStream));
        if (!this.wanted.has(id)) {
          // Its workspace was deleted while the copy travelled: what that deletion removed must not come back for a
          // new workspace of the same name to find.
          await rm(this.deps.code.pathOf(workspace, got.digest), { force: true });
          return;
        }
        if (got.digest === digest) {
          this.wanted.delete(id);
          return;
        }
        // Not the bytes asked for: dropped, unless the same bytes were here already for another object.
        if (!got.alreadyPresent) await rm(this.deps.code.pathOf(workspace, got.digest), { force: true });
      }
      const tries = (this.wanted.get(id) ?? 0) + 1;
      if (tries < MAX_TRIES) this.wanted.set(id, tries);
      else {
        this.wanted.delete(id);
        this.deps.logger?.warn({ workspace, digest }, 'no other server had this source to copy');
      }
    } catch (err) {
      this.deps.logger?.warn({ err, workspace, digest }, 'could not copy a source from another server');
    } finally {
      this.fetching.delete(id);
    }
  }
}
