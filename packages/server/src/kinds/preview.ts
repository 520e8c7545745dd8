// Sandbox preview (§2.7): a public or token-protected URL to one port of a sandbox.
import { Type } from './typebox.js';
import type { FieldIssue } from '../errors.js';
import { Duration, MESSAGE_KEY, opt, StringMap, Timestamp } from './common.js';
import { verifiedDomainIssues } from './custom-domain.js';
import { durationMs } from './rules.js';
import { RESERVED_RUN_SEGMENTS } from './trigger-path.js';
import type { KindDescriptor } from './types.js';

/** Record kind of preview tokens (api/preview-tokens.ts), stored under `<sandbox>/<preview>`. */
export const PREVIEW_TOKEN_KIND = 'PreviewToken';

export const PreviewSpec = Type.Object({
  customDomain: opt(
    Type.String({
      pattern: '^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$',
      maxLength: 253,
      [MESSAGE_KEY]: 'must be a lowercase domain name like app.example.com',
    }),
  ),
  /** ISO date after which the preview stops answering. */
  expires: opt(Timestamp),
  port: Type.Integer({ minimum: 1, maximum: 65535 }),
  /**
   * The preview's address starts with it (decision 085): `pv-<prefix>-<workspace>.<region>.<inference_host>`, and
   * `{run}/<workspace>/<prefix>`; held in the address table, so no two previews share one.
   */
  prefixUrl: opt(
    Type.String({
      pattern: '^[a-z0-9]([a-z0-9-]*[a-z0-9])?$',
      maxLength: 63,
      [MESSAGE_KEY]: 'must be a lowercase DNS label like my-app (letters, digits and -)',
    }),
  ),
  public: opt(Type.Boolean()),
  requestHeaders: opt(StringMap),
  responseHeaders: opt(StringMap),
  /** Max age from creation. */
  ttl: opt(Duration),
  /** Written by the server (response only). */
  region: opt(Type.String()),
  /** Written by the server (response only). */
  url: opt(Type.String()),
});

/** Hop-by-hop and framing headers a preview may not inject: they would break the proxied exchange. */
const FORBIDDEN_HEADERS = new Set([
  'connection',
  'content-length',
  'host',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
  'proxy-connection',
]);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

function headerIssues(headers: Record<string, string> | undefined, field: string): FieldIssue[] {
  const out: FieldIssue[] = [];
  for (const [k, v] of Object.entries(headers ?? {})) {
    const at = `/spec/${field}/${k.replaceAll('~', '~0').replaceAll('/', '~1')}`;
    if (!HEADER_NAME.test(k)) out.push({ pointer: at, message: 'is not a valid header name' });
    else if (FORBIDDEN_HEADERS.has(k.toLowerCase()))
      out.push({ pointer: at, message: 'cannot be set by a preview' });
    else if (/[\r\n\0]/.test(v)) out.push({ pointer: at, message: 'header values cannot hold line breaks' });
  }
  return out;
}

/** Characters of `pv-<prefix>-<workspace>` (a DNS label, RFC 1035) beside the prefix and the workspace. */
const PREFIX_LABEL_EXTRA = 'pv--'.length;

/** Why a `prefixUrl` cannot be an address of this workspace (its pattern is the schema's). */
function prefixIssues(prefix: string | undefined, workspace: string): FieldIssue[] {
  if (prefix === undefined) return [];
  const pointer = '/spec/prefixUrl';
  if (RESERVED_RUN_SEGMENTS.includes(prefix))
    return [{ pointer, message: `must not be ${prefix}: that part of the run URL serves ${prefix} by name` }];
  const max = 63 - PREFIX_LABEL_EXTRA - workspace.length;
  if (prefix.length > max)
    return [
      {
        pointer,
        message: `must be at most ${max} characters in this workspace: pv-<prefix>-${workspace} is a DNS label (63 at most)`,
      },
    ];
  return [];
}

export const preview = {
  kind: 'Preview',
  plural: 'previews',
  aliases: ['preview', 'pv'],
  path: '/sandboxes/{sandboxName}/previews',
  nameParam: 'previewName',
  parents: [{ param: 'sandboxName', kind: 'Sandbox', metadataField: 'resourceName' }],
  cascade: true,
  ownedRecords: [PREVIEW_TOKEN_KIND],
  description: 'Public or token-protected URL to a port of a sandbox.',
  spec: PreviewSpec,
  metadataExtra: { resourceName: Type.String(), resourceType: Type.String() },
  readOnlySpec: ['/url', '/region'],
  hasStatus: true,
  stampMetadata(meta) {
    meta.resourceType = 'Sandbox';
  },
  defaults(spec, { regions }) {
    spec.public ??= false;
    spec.region ??= regions[0];
  },
  async validate(next, _prev, ctx) {
    const s = next.spec;
    return [
      ...(s.customDomain === undefined
        ? []
        : await verifiedDomainIssues(ctx, [{ domain: s.customDomain, pointer: '/spec/customDomain' }])),
      ...headerIssues(s.requestHeaders, 'requestHeaders'),
      ...headerIssues(s.responseHeaders, 'responseHeaders'),
      ...prefixIssues(s.prefixUrl, ctx.workspace),
    ];
  },
  decorate(obj) {
    // The address the gateway serves the preview at is the object's URL (filled by the server's urlOf).
    if (obj.metadata?.url && !obj.spec.url) obj.spec.url = obj.metadata.url;
  },
} satisfies KindDescriptor;

/**
 * Epoch ms after which the preview no longer answers (the gateway) and is deleted (the expiry sweep): the earlier
 * of `expires` and `ttl` from creation; undefined without either.
 */
export function previewExpiresAtMs(body: any): number | undefined {
  const out: number[] = [];
  if (body.spec?.expires) out.push(Date.parse(body.spec.expires));
  const ttl = durationMs(body.spec?.ttl);
  if (ttl !== undefined) out.push(Date.parse(body.metadata?.createdAt ?? '') + ttl);
  const valid = out.filter(Number.isFinite);
  return valid.length ? Math.min(...valid) : undefined;
}
