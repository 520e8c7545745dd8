// Versions of a volume template (§2.11, §4.1): GET .../versions, PUT .../versions/{versionName} with a tar or
// tar.gz body (Content-Type application/x-tar, application/gzip or application/octet-stream; streamed to disk,
// capped at MAX_ARCHIVE_BYTES, refused with 422 when an entry would land outside the volume) uploads its content,
// a JSON body records a version without content; DELETE .../versions/{versionName} -> {message, template}.
// Versions live in the template object itself, so a version and the template's state change in one write;
// the archive is written first and its version recorded after, so a crash leaves at most an unreferenced file.
import { randomUUID } from 'node:crypto';
import { Type } from '../kinds/typebox.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { opt } from '../kinds/common.js';
import { checkValue, prune } from '../kinds/schema.js';
import { volumeTemplate } from '../kinds/volume-template.js';
import type { Resources } from '../store/resources.js';
import { keyOf, StoreError, type StoredObject } from '../store/store.js';
import { requireRole } from '../auth/require-role.js';
import { warnDropped } from './crud.js';
import { ApiError, invalid, notFound } from '../errors.js';
import { answerList } from './api-version.js';
import {
  ArchiveTooLarge,
  archivePath,
  archiveProblem,
  removeArchive,
  saveArchive,
} from '../runtime/volume-archives.js';

/** Largest archive one version may hold: a prepared dataset or dependency cache, bounded for one local disk. */
export const MAX_ARCHIVE_BYTES = 2 * 1024 * 1024 * 1024;
/** Content types of an archive upload; anything else is the JSON version record. */
export const ARCHIVE_TYPES = [
  'application/x-tar',
  'application/gzip',
  'application/x-gzip',
  'application/octet-stream',
];

/** Versions one template keeps; older ones are deleted explicitly, never dropped silently. */
export const MAX_VERSIONS = 100;
export const VERSION_NAME = /^[A-Za-z0-9]([A-Za-z0-9._-]{0,62})$/;

export const VersionBody = Type.Object({
  region: opt(Type.String()),
  contentSize: opt(Type.Integer({ minimum: 0 })),
  bucket: opt(Type.String({ maxLength: 253 })),
});

export interface VersionDeps {
  resources: Resources;
  now?: () => Date;
  /** The data dir archives are kept under (runtime/volume-archives.ts); without it uploads are refused (415). */
  dataDir?: string;
  maxArchiveBytes?: number;
}

interface Version {
  bucket?: string;
  contentSize?: number;
  name: string;
  region?: string;
  templateName: string;
  versionId: string;
  workspace: string;
}

export function register(v0: FastifyInstance, deps: VersionDeps) {
  // Its own scope: the archive parser (a pass-through stream) applies to these routes only.
  v0.register(async (s) => {
    s.addContentTypeParser(ARCHIVE_TYPES, (_req, payload, done) => done(null, payload));
    routes(s, deps);
  });
}

function routes(v0: FastifyInstance, deps: VersionDeps) {
  const { resources } = deps;
  const now = deps.now ?? (() => new Date());
  const base = '/volume_templates/:volumeTemplateName/versions';

  const templateOf = (req: FastifyRequest, workspace: string) =>
    resources.mustGet(
      volumeTemplate,
      workspace,
      [],
      (req.params as Record<string, string>).volumeTemplateName,
    );

  /**
   * Applies `change` to the template's body as it is inside the write's transaction, so a concurrent write is never
   * lost and needs no retry; `change` may throw to refuse (the transaction then writes nothing).
   */
  async function modify(
    req: FastifyRequest,
    workspace: string,
    change: (body: any) => void,
  ): Promise<StoredObject> {
    const cur = await templateOf(req, workspace);
    const mutate = (now: StoredObject) => {
      const body = structuredClone(now.body);
      change(body);
      return body;
    };
    try {
      return (await resources.store.write([{ op: 'update', key: keyOf(cur), mutate }]))[0];
    } catch (e) {
      if (e instanceof StoreError && e.reason === 'not_found')
        throw notFound(`VolumeTemplate ${JSON.stringify(cur.name)}`);
      throw e;
    }
  }

  v0.get(base, async (req, reply) => {
    const a = requireRole(req, 'viewer');
    const t = await templateOf(req, a.workspace);
    answerList(req, reply);
    return t.body.versions ?? [];
  });

  v0.put(`${base}/:versionName`, async (req, reply) => {
    const a = requireRole(req, 'member');
    const { volumeTemplateName, versionName } = req.params as Record<string, string>;
    if (!VERSION_NAME.test(versionName))
      throw new ApiError(
        'MALFORMED_REQUEST',
        'versionName must be letters, digits, ".", "_" or "-" (at most 63)',
        {
          errors: [{ pointer: '/path/versionName', message: 'invalid version name' }],
        },
      );
    const upload = isArchive(req) ? req.body : undefined;
    const body = (upload ? {} : structuredClone(req.body ?? {})) as any;
    const dropped = prune(VersionBody, body);
    const issues = checkValue(VersionBody, body);
    if (issues.length) throw invalid(issues);
    const region = body.region ?? resources.regions[0];
    if (!resources.regions.includes(region))
      throw invalid([
        {
          pointer: '/region',
          message: `region ${JSON.stringify(region)} is not served here; known regions: ${resources.regions.join(', ')}`,
        },
      ]);
    const versionId = randomUUID();
    await templateOf(req, a.workspace); // 404 before reading a body for nothing
    const contentSize = upload
      ? await receiveArchive(a.workspace, volumeTemplateName, versionId, upload as NodeJS.ReadableStream)
      : body.contentSize;
    const version: Version = {
      bucket: body.bucket ?? (upload ? 'local' : undefined),
      ...(contentSize !== undefined ? { contentSize } : {}),
      name: versionName,
      region,
      templateName: volumeTemplateName,
      versionId,
      workspace: a.workspace,
    };
    if (version.bucket === undefined) delete version.bucket;
    let replaced: Version | undefined;
    await modify(req, a.workspace, (t) => {
      // A re-upload replaces the version of that name and makes it the latest.
      replaced = ((t.versions ?? []) as Version[]).find((v) => v.name === versionName);
      const others = ((t.versions ?? []) as Version[]).filter((v) => v.name !== versionName);
      if (others.length >= MAX_VERSIONS)
        throw new ApiError(
          'QUOTA_EXCEEDED',
          `a volume template keeps at most ${MAX_VERSIONS} versions; delete old ones first`,
        );
      t.versions = [...others, version];
      t.state = {
        ...t.state,
        latestVersion: versionName,
        versionCount: t.versions.length,
        lastVersionUploadedAt: now().toISOString(),
      };
    });
    if (replaced) dropArchive(a.workspace, replaced);
    warnDropped(reply, dropped);
    return version;
  });

  const isArchive = (req: FastifyRequest) =>
    ARCHIVE_TYPES.includes((req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase());

  /** Streams the body to its archive file; 413 past the cap, 422 when it is no archive or would escape. */
  async function receiveArchive(
    workspace: string,
    template: string,
    versionId: string,
    body: NodeJS.ReadableStream,
  ) {
    if (!deps.dataDir)
      throw new ApiError('UNSUPPORTED_MEDIA_TYPE', 'archive uploads are not enabled on this server');
    const cap = deps.maxArchiveBytes ?? MAX_ARCHIVE_BYTES;
    let size: number;
    try {
      size = await saveArchive(deps.dataDir, workspace, template, versionId, body, cap);
    } catch (e) {
      if (e instanceof ArchiveTooLarge)
        throw new ApiError('PAYLOAD_TOO_LARGE', `a volume template version holds at most ${cap} bytes`);
      throw e;
    }
    const file = archivePath(deps.dataDir, workspace, template, versionId);
    const problem = await archiveProblem(file);
    if (problem) {
      removeArchive(deps.dataDir, workspace, template, versionId);
      throw invalid([{ pointer: '/body', message: problem }]);
    }
    return size;
  }

  function dropArchive(workspace: string, v: Version) {
    if (deps.dataDir) removeArchive(deps.dataDir, workspace, v.templateName, v.versionId);
  }

  v0.delete(`${base}/:versionName`, async (req) => {
    const a = requireRole(req, 'member');
    const { volumeTemplateName, versionName } = req.params as Record<string, string>;
    let gone: Version | undefined;
    const updated = await modify(req, a.workspace, (t) => {
      const versions = (t.versions ?? []) as Version[];
      gone = versions.find((v) => v.name === versionName);
      if (!versions.some((v) => v.name === versionName))
        throw notFound(
          `version ${JSON.stringify(versionName)} of volume template ${JSON.stringify(volumeTemplateName)}`,
        );
      t.versions = versions.filter((v) => v.name !== versionName);
      const latest = t.versions.at(-1)?.name;
      t.state = { ...t.state, versionCount: t.versions.length };
      if (latest) t.state.latestVersion = latest;
      else delete t.state.latestVersion;
    });
    if (gone) dropArchive(a.workspace, gone);
    return {
      message: `version ${versionName} of volume template ${volumeTemplateName} deleted`,
      template: resources.view(volumeTemplate, updated),
    };
  });
}
