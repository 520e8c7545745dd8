// POST /v0/images/build (decision 051): the body is the build context as a tar (or tar.gz), the query names the image
// (`t`), the Dockerfile in the context, the target stage, build arguments, the cache and the RUN steps' network. What
// is wrong before anything runs (no name, no Dockerfile, an instruction Berth does not build) is a 4xx problem; then
// the answer streams as Docker's build API does, one JSON object a line: `{"stream": …}` for the log, and last either
// `{"aux": {"ID": …}, "image": …}` or `{"error": …, "errorDetail": {"message": …, "line": n}}`. A client that goes away
// stops the build.
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FastifyInstance } from 'fastify';
import { requireRole } from '../auth/require-role.js';
import { workspaceBuildsDir } from '../builds/layout.js';
import { applyDockerignore, ContextError, extractContext, resolveIn } from '../builds/dockerfile/context.js';
import { buildImage, type ImageBuildDeps, ImageBuildError } from '../builds/dockerfile/engine.js';
import { DockerfileError, parseDockerfile } from '../builds/dockerfile/parse.js';
import { ApiError, invalid } from '../errors.js';
import { DENY_ALL, type EgressPolicy } from '../runtime/egress/policy.js';
import { ImageError } from '../runtime/images/errors.js';
import { ImageStore } from '../runtime/images/image-store.js';
import { imageApiError, type SecondCopy } from './images.js';
import { imageView } from './image-view.js';

/** Bytes of a build context, compressed as sent and unpacked: a source tree, not a data set. */
export const MAX_CONTEXT_BYTES = 2 * 1024 ** 3;

const list = (v: unknown): string[] =>
  v === undefined ? [] : Array.isArray(v) ? v.map(String) : [String(v)];

function egressOf(q: Record<string, unknown>): EgressPolicy | undefined {
  const network = q.network ?? 'default';
  const allow = list(q.allowDomain)
    .flatMap((d) => d.split(','))
    .filter(Boolean);
  if (network === 'none') {
    if (allow.length) throw invalid([{ pointer: '/allowDomain', message: 'network=none allows nothing' }]);
    return DENY_ALL;
  }
  if (network !== 'default') throw invalid([{ pointer: '/network', message: 'default or none' }]);
  return allow.length ? { allowedDomains: allow, forbiddenDomains: [] } : undefined;
}

export function register(v0: FastifyInstance, deps: ImageBuildDeps & { secondCopy?: SecondCopy }) {
  v0.register(async (s) => {
    s.addContentTypeParser(
      ['application/x-tar', 'application/gzip', 'application/x-gzip', 'application/octet-stream'],
      (_req, payload, done) => done(null, payload),
    );
    s.post('/images/build', async (req, reply) => {
      const a = requireRole(req, 'member');
      const q = (req.query ?? {}) as Record<string, unknown>;
      const name = typeof q.t === 'string' ? q.t : '';
      if (!name) throw invalid([{ pointer: '/t', message: 'the name to give the image, e.g. app:1' }]);
      try {
        ImageStore.parse(name);
      } catch (e) {
        throw invalid([{ pointer: '/t', message: (e as Error).message }]);
      }
      const buildArgs: Record<string, string> = {};
      for (const kv of list(q.buildArg)) {
        const eq = kv.indexOf('=');
        if (eq <= 0)
          throw invalid([{ pointer: '/buildArg', message: `${kv}: build arguments are NAME=value` }]);
        buildArgs[kv.slice(0, eq)] = kv.slice(eq + 1);
      }
      const egress = egressOf(q);
      if (!req.body || typeof (req.body as Readable).pipe !== 'function')
        throw new ApiError('UNSUPPORTED_MEDIA_TYPE', 'send the build context as application/x-tar');
      const work = join(
        workspaceBuildsDir(deps.dataDir, a.workspace),
        'image-work',
        randomBytes(8).toString('hex'),
      );
      const context = join(work, 'context');
      mkdirSync(context, { recursive: true, mode: 0o700 });
      try {
        let received = 0;
        const cap = new Transform({
          transform(chunk: Buffer, _e, cb) {
            received += chunk.length;
            if (received > MAX_CONTEXT_BYTES)
              cb(new ApiError('PAYLOAD_TOO_LARGE', `a build context is at most ${MAX_CONTEXT_BYTES} bytes`));
            else cb(null, chunk);
          },
        });
        await pipeline(
          req.body as Readable,
          cap,
          createWriteStream(join(work, 'context.tar'), { mode: 0o600 }),
        );
        try {
          await extractContext(join(work, 'context.tar'), context, MAX_CONTEXT_BYTES);
        } catch (e) {
          if (e instanceof ContextError) throw invalid([{ pointer: '/body', message: e.message }]);
          throw e;
        }
        rmSync(join(work, 'context.tar'), { force: true });
        const file = typeof q.dockerfile === 'string' && q.dockerfile ? q.dockerfile : 'Dockerfile';
        const at = join(context, resolveIn(context, file));
        if (!existsSync(at))
          throw invalid([{ pointer: '/dockerfile', message: `the context has no ${file}` }]);
        const dockerfile = readFileSync(at, 'utf8');
        try {
          parseDockerfile(dockerfile); // everything the engine would refuse before it runs anything
        } catch (e) {
          if (e instanceof DockerfileError) throw invalid([{ pointer: '/dockerfile', message: e.message }]);
          throw e;
        }
        applyDockerignore(context);
        const stop = new AbortController();
        req.raw.on('close', () => {
          if (!reply.raw.writableEnded) stop.abort(new Error('the client went away'));
        });
        reply.hijack();
        reply.raw.writeHead(200, { 'content-type': 'application/x-ndjson' });
        const send = (o: unknown) => reply.raw.write(`${JSON.stringify(o)}\n`);
        try {
          const image = await buildImage(
            deps,
            {
              workspace: a.workspace,
              contextDir: context,
              dockerfile,
              name,
              buildArgs,
              ...(typeof q.target === 'string' && q.target ? { target: q.target } : {}),
              noCache: q.noCache === 'true',
              ...(egress ? { egress } : {}),
            },
            (text) => send({ stream: text }),
            stop.signal,
          );
          // In a cluster the build is acknowledged once another node holds the image too (bounded: decision 087).
          const copies = await deps.secondCopy?.(a.workspace, [image.id]);
          if (copies !== undefined)
            send({ stream: `held by ${copies} node${copies === 1 ? '' : 's'} of the cluster\n` });
          send({ aux: { ID: image.id }, image: imageView(deps.images, a.workspace, image) });
        } catch (e) {
          const known =
            e instanceof ImageBuildError || e instanceof DockerfileError || e instanceof ContextError;
          const wire = e instanceof ImageError ? (imageApiError(e) as Error) : undefined;
          const message = known || wire ? (wire ?? (e as Error)).message : 'the build failed on the server';
          if (!known && !wire) req.log.error({ err: e }, 'image build failed');
          const line =
            e instanceof ImageBuildError ? e.step?.line : e instanceof DockerfileError ? e.line : undefined;
          send({ error: message, errorDetail: { message, ...(line ? { line } : {}) } });
        }
        reply.raw.end();
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
    });
  });
}
