// Code upload for agents and functions, the way the service's CLI sends it: `PUT|POST /v0/<kind>/<name>?upload=true`
// answers with an `X-Blaxel-Upload-Url` header (a single-use URL valid UPLOAD_URL_TTL_MS), and a PUT of the zip
// to that URL stores it by digest in the object's workspace; also `PUT /v0/<kind>/<name>/code` with a credential.
// A refused archive (zip-slip, absolute path, symbolic link, too large) is a 400/413 and nothing is built from it.
// The source digest is written beside status; the workload controller builds and deploys it
// (controllers/workload/deploy.ts).
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { requireRole } from '../auth/require-role.js';
import type { CodeStore } from '../builds/code-store.js';
import { UploadTooLargeError } from '../builds/code-store.js';
import { extractZip, UnsafeArchiveError } from '../builds/zip-extract.js';
import { ApiError } from '../errors.js';
import { isGone } from '../kinds/status.js';
import type { Resources } from '../store/resources.js';
import type { ResourceKey } from '../store/store.js';

/** How long an upload URL stays valid: the CLI uses it at once, and asks for a fresh one on each retry. */
export const UPLOAD_URL_TTL_MS = 15 * 60_000;
/** Upload URLs outstanding at once; the oldest is dropped beyond it (each is a few bytes, this bounds a flood). */
const MAX_PENDING_UPLOADS = 10_000;
export const UPLOAD_URL_HEADER = 'x-blaxel-upload-url';
export const CODE_KINDS = { agents: 'Agent', functions: 'Function', jobs: 'Job' } as const;

interface Pending {
  key: ResourceKey;
  expiresMs: number;
}

export interface CodeUploadDeps {
  resources: Resources;
  code: CodeStore;
  baseUrl: () => string;
  now?: () => number;
}

export class CodeUploads {
  private readonly pending = new Map<string, Pending>();
  private readonly now: () => number;
  constructor(private readonly deps: CodeUploadDeps) {
    this.now = deps.now ?? Date.now;
  }

  /** A fresh single-use upload URL for the object. */
  urlFor(key: ResourceKey): string {
    if (this.pending.size >= MAX_PENDING_UPLOADS) {
      const oldest = this.pending.keys().next().value;
      if (oldest) this.pending.delete(oldest);
    }
    const token = randomBytes(24).toString('base64url');
    this.pending.set(token, { key, expiresMs: this.now() + UPLOAD_URL_TTL_MS });
    return `${this.deps.baseUrl()}/uploads/${token}`;
  }

  private take(token: string): ResourceKey {
    const p = this.pending.get(token);
    this.pending.delete(token);
    if (!p || p.expiresMs < this.now())
      throw new ApiError(
        'NOT_FOUND',
        'this upload URL is unknown, used or expired: ask for a new one with ?upload=true',
      );
    return p.key;
  }

  /** Stores the zip, checks it, and hands its digest to the controller. */
  async receive(key: ResourceKey, body: IncomingMessage) {
    const { resources, code } = this.deps;
    const cur = await resources.store.get(key);
    if (!cur || isGone(cur))
      throw new ApiError('NOT_FOUND', `${key.kind.toLowerCase()} ${JSON.stringify(key.name)} not found`);
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
        const key = this.take((req.params as { token: string }).token);
        return this.receive(key, req.raw);
      });
      for (const [plural, kind] of Object.entries(CODE_KINDS))
        scope.put(`/v0/${plural}/:name/code`, async (req: FastifyRequest, reply: FastifyReply) => {
          const a = requireRole(req, 'member');
          const name = (req.params as { name: string }).name;
          reply.code(200);
          return this.receive({ kind, workspace: a.workspace, parent: '', name }, req.raw);
        });
    });
  }
}
