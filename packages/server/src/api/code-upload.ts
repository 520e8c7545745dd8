// Code upload for agents and functions, the way the service's CLI sends it: `PUT|POST /v0/<kind>/<name>?upload=true`
// answers with an `X-Blaxel-Upload-Url` header (a single-use URL valid UPLOAD_URL_TTL_MS), and a PUT of the zip
// to that URL stores it by digest in the object's workspace; also `PUT /v0/<kind>/<name>/code` with a credential.
// The URL's token is signed, not remembered (decision 082): an HMAC, under a key derived from the master key every
// server of a cluster shares, of the object it was issued for (workspace, kind, name, creation), the object's store
// version at the write that asked for it, and its expiry. Any server accepts it, so a URL issued before a failover
// works after it. Single use is kept in the object: a token is taken, before its body is read, by a write that
// records its version on the object (`uploadTaken`) only while the one recorded is lower; taken, it is used, whatever
// the upload then gives (a refused archive too), and so is every URL issued before it.
// A refused archive (zip-slip, absolute path, symbolic link, too large) is a 400/413 and nothing is built from it.
// The source digest is written beside status; the workload controller builds and deploys it
// (controllers/workload/deploy.ts).
import { createHmac, timingSafeEqual } from 'node:crypto';
import { rm } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { requireRole } from '../auth/require-role.js';
import type { CodeStore } from '../builds/code-store.js';
import { UploadTooLargeError } from '../builds/code-store.js';
import { extractZip, UnsafeArchiveError } from '../builds/zip-extract.js';
import { derivedKey } from '../crypto/derived-keys.js';
import { ApiError } from '../errors.js';
import { isGone } from '../kinds/status.js';
import type { Resources } from '../store/resources.js';
import type { ResourceKey, StoredObject } from '../store/store.js';

/** How long an upload URL stays valid: the CLI uses it at once, and asks for a fresh one on each retry. */
export const UPLOAD_URL_TTL_MS = 15 * 60_000;
export const UPLOAD_URL_HEADER = 'x-blaxel-upload-url';
export const CODE_KINDS = { agents: 'Agent', functions: 'Function', jobs: 'Job' } as const;

/** What an upload URL's token is signed over. */
export interface UploadClaim {
  /** Workspace, kind, name of the object. */
  w: string;
  k: string;
  n: string;
  /** The object's metadata.createdAt: a URL of an object deleted and made again is not the new one's. */
  c: string;
  /** The object's store version at the write that asked for the URL (unique and increasing cluster-wide). */
  v: number;
  /** Expiry, epoch ms. */
  e: number;
}

/** What one upload takes: the object, and the token's version when it came through an upload URL. */
interface Upload {
  key: ResourceKey;
  version?: number;
  createdAt?: string;
}

export interface CodeUploadDeps {
  resources: Resources;
  code: CodeStore;
  baseUrl: () => string;
  /** The server's master key (the cluster's, shared by every server): the URLs' signing key is derived from it. */
  masterKey: Buffer;
  now?: () => number;
}

const KINDS = new Set<string>(Object.values(CODE_KINDS));

/** The upload URLs' own key: a signature made for them means nothing anywhere else the master key is used. */
const uploadKey = (masterKey: Buffer) => derivedKey(masterKey, 'uploadUrls');
const signature = (key: Buffer, payload: string) => createHmac('sha256', key).update(payload).digest();

/** The token of an upload URL (`<claim>.<signature>`, base64url) as every server of the cluster signs it. */
export function uploadToken(masterKey: Buffer, claim: UploadClaim): string {
  const payload = Buffer.from(JSON.stringify(claim)).toString('base64url');
  return `${payload}.${signature(uploadKey(masterKey), payload).toString('base64url')}`;
}

const refused = (why: string) =>
  new ApiError('NOT_FOUND', `this upload URL ${why}: ask for a new one with ?upload=true`);

export class CodeUploads {
  private readonly now: () => number;
  private readonly key: Buffer;
  constructor(private readonly deps: CodeUploadDeps) {
    this.now = deps.now ?? Date.now;
    this.key = uploadKey(deps.masterKey);
  }

  /** A fresh single-use upload URL for the object as the write asking for it stored it. */
  urlFor(o: StoredObject): string {
    const claim: UploadClaim = {
      w: o.workspace,
      k: o.kind,
      n: o.name,
      c: String(o.body.metadata?.createdAt ?? ''),
      v: o.resourceVersion,
      e: this.now() + UPLOAD_URL_TTL_MS,
    };
    return `${this.deps.baseUrl()}/uploads/${uploadToken(this.deps.masterKey, claim)}`;
  }

  /** The object a token names, once its signature and expiry hold; whether it was used is judged at the write. */
  private take(token: string): Upload {
    const dot = token.indexOf('.');
    const payload = token.slice(0, dot);
    const sig = Buffer.from(token.slice(dot + 1), 'base64url');
    const want = signature(this.key, payload);
    if (dot < 0 || sig.length !== want.length || !timingSafeEqual(sig, want))
      throw refused('is not one Berth issued');
    let c: UploadClaim;
    try {
      c = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    } catch {
      throw refused('is not one Berth issued');
    }
    if (
      !c ||
      typeof c.w !== 'string' ||
      typeof c.n !== 'string' ||
      typeof c.c !== 'string' ||
      !KINDS.has(c.k) ||
      !Number.isSafeInteger(c.v) ||
      !Number.isSafeInteger(c.e)
    )
      throw refused('is not one Berth issued');
    if (c.e < this.now()) throw refused(`expired at ${new Date(c.e).toISOString()}`);
    return { key: { kind: c.k, workspace: c.w, parent: '', name: c.n }, version: c.v, createdAt: c.c };
  }

  /** Stores the zip, checks it, and hands its digest to the controller. */
  async receive(up: Upload, body: IncomingMessage) {
    const { resources, code } = this.deps;
    const { key, version } = up;
    const cur = await resources.store.get(key);
    if (!cur || isGone(cur))
      throw new ApiError('NOT_FOUND', `${key.kind.toLowerCase()} ${JSON.stringify(key.name)} not found`);
    if (up.createdAt !== undefined && String(cur.body.metadata?.createdAt ?? '') !== up.createdAt)
      throw refused(`was issued for an earlier ${key.kind.toLowerCase()} of that name`);
    if (version !== undefined) {
      // Single use: taken in one write (two requests with one URL: one wins), before anything of the upload is read.
      let used = false;
      const taken = await resources.updateStatus(key, {
        extras: { uploadTaken: version },
        when: (o) => {
          used = (o.body.uploadTaken ?? 0) >= version;
          return !isGone(o) && !used;
        },
      });
      if (!taken)
        throw used
          ? refused('was used already')
          : new ApiError('NOT_FOUND', `${key.kind.toLowerCase()} ${JSON.stringify(key.name)} not found`);
    }
    let stored: Awaited<ReturnType<CodeStore['put']>>;
    try {
      stored = await code.put(key.workspace, body);
    } catch (err) {
      if (err instanceof UploadTooLargeError) throw new ApiError('PAYLOAD_TOO_LARGE', err.message);
      throw err;
    }
    try {
      await extractZip(code.pathOf(key.workspace, stored.digest));
    } catch (err) {
      if (!stored.alreadyPresent) await rm(code.pathOf(key.workspace, stored.digest), { force: true });
      if (err instanceof UnsafeArchiveError)
        throw new ApiError('MALFORMED_REQUEST', `the archive was refused: ${err.message}`);
      throw err;
    }
    const same = cur.body.source?.digest === stored.digest;
    await resources.updateStatus(key, {
      to: same && cur.body.status !== 'FAILED' ? undefined : 'BUILDING',
      message: `source uploaded: ${stored.digest} (${stored.size} bytes)`,
      extras: same
        ? undefined
        : {
            source: {
              digest: stored.digest,
              size: stored.size,
              uploadedAt: new Date(this.now()).toISOString(),
            },
          },
      when: (o) => !isGone(o),
    });
    return { digest: stored.digest, size: stored.size, alreadyPresent: same };
  }

  register(app: FastifyInstance) {
    app.register(async (scope) => {
      // The zip is read as a stream by the route (CodeStore caps it), never buffered by a parser.
      for (const type of ['application/zip', 'application/octet-stream', 'application/x-zip-compressed'])
        scope.addContentTypeParser(type, (_req, payload, done) => done(null, payload));
      scope.put('/uploads/:token', async (req: FastifyRequest) => {
        return this.receive(this.take((req.params as { token: string }).token), req.raw);
      });
      for (const [plural, kind] of Object.entries(CODE_KINDS))
        scope.put(`/v0/${plural}/:name/code`, async (req: FastifyRequest, reply: FastifyReply) => {
          const a = requireRole(req, 'member');
          const name = (req.params as { name: string }).name;
          reply.code(200);
          return this.receive({ key: { kind, workspace: a.workspace, parent: '', name } }, req.raw);
        });
    });
  }
}
