// Built apps across the nodes of a cluster (docs/decisions/094-built-apps-across-nodes.md). A node that needs an app
// it lacks (a replica slot placed on it, a build ahead, a new leader's deploy) copies it from a node that holds it
// instead of building it again: one build's CPU for the cluster, and every node runs the very bytes that build made.
// Copies travel on two peer routes beside 063's code copies and 081's images:
//   GET /peer/apps/<workspace>/<key>           the app's plan, the digest of its archive recorded at build, its log
//   GET /peer/apps/<workspace>/<key>/archive   the app directory as an archive (app-archive.ts)
// They answer only a server showing the cluster's peer token (crypto/peer-token.ts), and only about an app built in
// the named workspace's own folder: anything else (no token, another workspace's key) is the same 404. The copying
// node hashes the archive as it unpacks it beside the app's place and renames it in only when the digest is the one
// the revision recorded (else the holder's own record); a copy that arrives otherwise is refused and asked of the next
// holder, and the caller's next pass asks again. Only when no live node holds the app does this node build it.
// An app built from a Dockerfile is an image of the workspace (`berth-builds/app:<key>`, decision 051) and its plan:
// its recorded digest is the image's id, and the image is copied through the image routes (peer-images.ts, which
// check every blob and the config against it) from the same holder, then bound under that name here.
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { PEER_TOKEN_HEADER, showsPeerToken } from '../crypto/peer-token.js';
import { notFound } from '../errors.js';
import { NAME_PATTERN } from '../kinds/common.js';
import { AppCopyError, packApp, unpackApp } from './app-archive.js';
import { type AppSource, type BuiltApp, type Builder, KEY } from './builder.js';
import { builtImageName } from './dockerfile/workload.js';
import { appsDirOf } from './layout.js';

const WORKSPACE = new RegExp(NAME_PATTERN);
const DIGEST = /^sha256:[0-9a-f]{64}$/;
/** What asking a peer whether it holds an app may take: a live node answers from its disk in milliseconds. */
const DESCRIBE_TIMEOUT_MS = 5_000;
/** What one copy may take (a large app's node_modules over a slow link). */
const COPY_TIMEOUT_MS = 10 * 60_000;
/** The build log a holder sends with the app: its end, where a failure or the start command is said. */
const LOG_BYTES = 256 * 1024;
/**
 * Rounds of holders failing to give an app whole (their bytes rotted, the link cut) after which this node builds it
 * itself: a holder whose copy stays wrong must not keep a revision from running here.
 */
export const MAX_FAILED_ROUNDS = 3;

/** What a holder says about an app it built (or copied). */
export interface AppDescription {
  key: string;
  /** The digest of its archive, recorded when it was built. */
  archive: string;
  /** The plan file's content: the build plan, with its base image. */
  plan: Record<string, unknown>;
  /** The end of its build log. */
  log: string;
}

export type AppCopyOutcome = 'copied' | 'refused';

/** The image store's part in the apps built from a Dockerfile (the image is the app). */
export interface AppImages {
  /** Whether `workspace` holds the image `id` here. */
  holds(workspace: string, id: string): boolean;
  /** Copies `workspace`'s image `id` from `peer` (checked against the id), bound here as `name`; false: not there. */
  copy(workspace: string, id: string, name: string, peer: URL): Promise<boolean>;
}

export interface AppCopiesDeps {
  dataDir: string;
  /** Apps built from a Dockerfile are given and copied only with it. */
  images?: AppImages;
  builder: Pick<Builder, 'builtByKey' | 'readLog' | 'logPath'>;
  /** This cluster's peer token (peerToken of the master key). */
  token: string;
  /** The peer addresses of the other healthy nodes. */
  peers: () => Promise<URL[]>;
  logger?: Logger;
}

export class AppCopies implements AppSource {
  /** Rounds failed so far per `<workspace>/<key>` (reset by a copy that worked). */
  private readonly failedRounds = new Map<string, number>();
  /** Told of each copy made and each refused (the /metrics counter). */
  counted?: (outcome: AppCopyOutcome) => void;

  constructor(private readonly deps: AppCopiesDeps) {}

  /** The app `key` of `workspace` here, when it can be given: built (not a Dockerfile's image) with its digest. */
  private held(req: FastifyRequest): { app: BuiltApp; workspace: string } {
    const { workspace, key } = req.params as { workspace: string; key: string };
    if (!showsPeerToken(req.headers, this.deps.token) || !WORKSPACE.test(workspace) || !KEY.test(key))
      throw notFound('app');
    const app = this.deps.builder.builtByKey(workspace, key);
    if (!app?.archive) throw notFound('app');
    if (isDockerfileApp(app) ? !this.deps.images?.holds(workspace, app.archive) : !app.dir)
      throw notFound('app');
    return { app, workspace };
  }

  register(app: FastifyInstance) {
    app.get('/peer/apps/:workspace/:key', async (req: FastifyRequest) => {
      const { app: built, workspace } = this.held(req);
      const log = this.deps.builder.readLog(workspace, built.key) ?? '';
      const answer: AppDescription = {
        key: built.key,
        archive: built.archive as string,
        plan: { ...built.plan, ...(built.base ? { base: built.base } : {}) },
        log: log.length > LOG_BYTES ? log.slice(-LOG_BYTES) : log,
      };
      return answer;
    });
    app.get('/peer/apps/:workspace/:key/archive', async (req: FastifyRequest, reply: FastifyReply) => {
      const { app: built } = this.held(req);
      if (isDockerfileApp(built)) throw notFound('app'); // its image travels by the image routes
      reply.header('content-type', 'application/x-tar');
      return reply.send(packApp(built.dir));
    });
  }

  /**
   * The app `key` of `workspace`, copied here from a live node that holds it (the one whose recorded digest is
   * `want.digest` when given). Undefined when none holds it, or none still does after the copies failed (build it
   * here); throws AppCopyError when holders still do but none gave it whole (try again later), until
   * MAX_FAILED_ROUNDS rounds failed (then undefined: build it here).
   */
  async copy(
    workspace: string,
    key: string,
    want: { digest?: string },
    signal: AbortSignal,
  ): Promise<BuiltApp | undefined> {
    const id = `${workspace}/${key}`;
    const what = `app ${key} of workspace ${workspace}`;
    const rounds = this.failedRounds.get(id) ?? 0;
    if (rounds >= MAX_FAILED_ROUNDS) {
      this.failedRounds.delete(id);
      this.deps.logger?.warn(
        { workspace, key, rounds },
        'no holder gave this built app whole; building it here from its source',
      );
      return undefined;
    }
    const peers = await this.deps.peers();
    const described = await Promise.all(
      peers.map((p) => this.describe(p, workspace, key, signal).then((d) => d && { peer: p, d })),
    );
    const holders = described.filter(
      (h): h is { peer: URL; d: AppDescription } => !!h && (!want.digest || h.d.archive === want.digest),
    );
    if (!holders.length) return undefined;
    let last: unknown;
    for (const { peer, d } of holders) {
      try {
        const app = await this.fetchFrom(peer, workspace, d, signal, what);
        this.failedRounds.delete(id);
        this.counted?.('copied');
        return app;
      } catch (err) {
        if (signal.aborted) throw err;
        last = err;
        this.counted?.('refused');
        this.deps.logger?.warn(
          { workspace, key, from: peer.host, err: (err as Error).message },
          'a copy of a built app was refused',
        );
      }
    }
    // Holders that went away mid-copy (killed, drained) do not hold it any more: with none left, it is built here now
    // rather than after rounds of waiting for nodes that will not answer.
    const left = await Promise.all(holders.map((h) => this.describe(h.peer, workspace, key, signal)));
    if (!left.some((d) => d && (!want.digest || d.archive === want.digest))) {
      this.failedRounds.delete(id);
      this.deps.logger?.warn(
        { workspace, key, err: (last as Error)?.message },
        'the nodes holding this built app went away during its copy; building it here from its source',
      );
      return undefined;
    }
    this.failedRounds.set(id, rounds + 1);
    throw new AppCopyError(
      `${what}: no node holding it gave it whole (${(last as Error)?.message}); trying again later`,
    );
  }

  /** What `peer` says of the app; undefined when it does not hold it or cannot be asked. */
  private async describe(
    peer: URL,
    workspace: string,
    key: string,
    signal: AbortSignal,
  ): Promise<AppDescription | undefined> {
    try {
      const r = await fetch(new URL(`/peer/apps/${workspace}/${key}`, peer), {
        headers: { [PEER_TOKEN_HEADER]: this.deps.token },
        signal: AbortSignal.any([signal, AbortSignal.timeout(DESCRIBE_TIMEOUT_MS)]),
      });
      if (!r.ok) {
        await r.body?.cancel();
        return undefined;
      }
      const d = (await r.json()) as AppDescription;
      const plan = d?.plan;
      if (
        d?.key !== key ||
        !DIGEST.test(String(d.archive)) ||
        typeof plan?.start !== 'string' ||
        (plan.language === 'dockerfile' && !this.deps.images)
      )
        return undefined;
      return { key, archive: d.archive, plan, log: typeof d.log === 'string' ? d.log : '' };
    } catch {
      return undefined;
    }
  }

  /** Unpacks `d`'s archive from `peer` into place, checked against its digest, then writes its plan and log. */
  private async fetchFrom(
    peer: URL,
    workspace: string,
    d: AppDescription,
    signal: AbortSignal,
    what: string,
  ): Promise<BuiltApp> {
    const started = performance.now();
    const apps = appsDirOf(this.deps.dataDir, workspace);
    const log = this.deps.builder.logPath(workspace, d.key);
    mkdirSync(apps, { recursive: true });
    mkdirSync(join(log, '..'), { recursive: true });
    if (d.plan.language === 'dockerfile') return this.imageFrom(peer, workspace, d, signal, what, started);
    const r = await fetch(new URL(`/peer/apps/${workspace}/${d.key}/archive`, peer), {
      headers: { [PEER_TOKEN_HEADER]: this.deps.token },
      signal: AbortSignal.any([signal, AbortSignal.timeout(COPY_TIMEOUT_MS)]),
    }).catch((err) => {
      throw new AppCopyError(`${what}: ${peer.host} could not be asked (${(err as Error).message})`);
    });
    if (!r.ok || !r.body) {
      await r.body?.cancel();
      throw new AppCopyError(`${what}: ${peer.host} answered ${r.status}`);
    }
    const dir = join(apps, d.key);
    const size = await unpackApp(Readable.fromWeb(r.body as WebReadableStream), dir, d.archive, what);
    if (signal.aborted) {
      // Its workspace was deleted meanwhile: nothing of it may stay for a new workspace of the same name.
      rmSync(dir, { recursive: true, force: true });
      signal.throwIfAborted();
    }
    const ms = Math.round(performance.now() - started);
    return this.marked(workspace, d, dir, peer, `archive ${d.archive}, ${size} bytes, ${ms} ms`);
  }

  /** A Dockerfile app: its image, copied through the image routes and checked against its id, under its name. */
  private async imageFrom(
    peer: URL,
    workspace: string,
    d: AppDescription,
    signal: AbortSignal,
    what: string,
    started: number,
  ): Promise<BuiltApp> {
    const base = d.plan.base as BuiltApp['base'];
    if (base?.id !== d.archive) throw new AppCopyError(`${what}: ${peer.host} described another image`);
    const copied = await this.deps.images
      ?.copy(workspace, d.archive, builtImageName(d.key), peer)
      .catch((err) => {
        throw new AppCopyError(`${what}: its image could not be copied (${(err as Error).message})`);
      });
    if (!copied) throw new AppCopyError(`${what}: ${peer.host} no longer holds its image`);
    signal.throwIfAborted();
    const ms = Math.round(performance.now() - started);
    // builtByKey looks for the app's directory too: an empty one, as a build makes for a Dockerfile app.
    mkdirSync(join(appsDirOf(this.deps.dataDir, workspace), d.key), { recursive: true });
    return this.marked(workspace, d, '', peer, `image ${d.archive}, ${ms} ms`);
  }

  /** Writes a copied app's log and plan (the plan file marks it here: builtByKey), and says so. */
  private marked(workspace: string, d: AppDescription, dir: string, peer: URL, how: string): BuiltApp {
    const apps = appsDirOf(this.deps.dataDir, workspace);
    writeFileSync(
      this.deps.builder.logPath(workspace, d.key),
      `${d.log}${d.log && !d.log.endsWith('\n') ? '\n' : ''}berth: copied from ${peer.host} (${how}): not built here\n`,
    );
    writeFileSync(join(apps, `${d.key}.json.tmp`), JSON.stringify({ ...d.plan, archive: d.archive }));
    renameSync(join(apps, `${d.key}.json.tmp`), join(apps, `${d.key}.json`));
    this.deps.logger?.info(
      { workspace, key: d.key, from: peer.host, archive: d.archive, how },
      'copied a built app from another server instead of building it',
    );
    const { base, ...plan } = d.plan as Record<string, unknown> & { base?: BuiltApp['base'] };
    return {
      key: d.key,
      dir,
      plan: plan as unknown as BuiltApp['plan'],
      ...(base ? { base } : {}),
      archive: d.archive,
      cached: false,
      copiedFrom: peer.host,
    };
  }
}

const isDockerfileApp = (app: BuiltApp) => app.plan.language === 'dockerfile';
