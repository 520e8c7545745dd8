// Versions of a volume template (§2.11, §4.1): GET .../versions, PUT .../versions/{versionName} (records a
// version; the content upload comes later), DELETE .../versions/{versionName} -> {message, template}.
// Versions live in the template object itself, so a version and the template's state change in one write.
import { randomUUID } from 'node:crypto';
import { Type } from '@sinclair/typebox';
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
    const body = structuredClone(req.body ?? {}) as any;
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
    const version: Version = {
      ...(body.bucket !== undefined ? { bucket: body.bucket } : {}),
      ...(body.contentSize !== undefined ? { contentSize: body.contentSize } : {}),
      name: versionName,
      region,
      templateName: volumeTemplateName,
      versionId: randomUUID(),
      workspace: a.workspace,
    };
    await modify(req, a.workspace, (t) => {
      // A re-upload replaces the version of that name and makes it the latest.
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
    warnDropped(reply, dropped);
    return version;
  });

  v0.delete(`${base}/:versionName`, async (req) => {
    const a = requireRole(req, 'member');
    const { volumeTemplateName, versionName } = req.params as Record<string, string>;
    const updated = await modify(req, a.workspace, (t) => {
      const versions = (t.versions ?? []) as Version[];
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
    return {
      message: `version ${versionName} of volume template ${volumeTemplateName} deleted`,
      template: resources.view(volumeTemplate, updated),
    };
  });
}
