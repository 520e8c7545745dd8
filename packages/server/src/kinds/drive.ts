// Drive (the service's shared storage, beyond the specification; decision 031): an image with a size cap like a
// volume, attached live to running sandboxes through the sandbox API (several at once), with access rules by
// the sandbox's labels.
import { Type } from './typebox.js';
import { ExternalId, Labels, opt, Quantity } from './common.js';
import { regionIssues } from './rules.js';
import type { KindDescriptor } from './types.js';
import { DEFAULT_VOLUME_SIZE_MB, MAX_VOLUME_SIZE_MB } from './volume.js';

/** The service accepts at most this many permissions per drive. */
export const MAX_DRIVE_PERMISSIONS = 3;

export const DrivePermission = Type.Object({
  /** Labels the sandbox must all have (AND); none: every sandbox. */
  labels: opt(Labels),
  mode: opt(Type.Union([Type.Literal('read'), Type.Literal('read-write')], { default: 'read-write' })),
  /** The directory of the drive this permission reaches; `/` (all of it) by default. */
  path: opt(Type.String({ pattern: '^/', maxLength: 1024 })),
});

export const DriveSpec = Type.Object({
  region: opt(Type.String()),
  /** Empty or absent: every sandbox of the workspace may mount the drive. One match (OR) grants access. */
  permissions: opt(Type.Array(DrivePermission, { maxItems: MAX_DRIVE_PERMISSIONS })),
  /** The cap, enforced by the file system like a volume's; the service's newer drives have none (elastic). */
  size: opt(Quantity('MB', { minimum: 1, maximum: MAX_VOLUME_SIZE_MB, example: DEFAULT_VOLUME_SIZE_MB })),
});

export const drive = {
  kind: 'Drive',
  plural: 'drives',
  aliases: ['drive'],
  path: '/drives',
  nameParam: 'driveName',
  description: 'Shared storage mounted into running sandboxes through the sandbox API, several at once.',
  spec: DriveSpec,
  hasStatus: true,
  metadataInput: { externalId: ExternalId },
  immutable: ['/size', '/region'],
  readOnly: { terminatedAt: Type.String() },
  defaults(spec, { regions }) {
    spec.size ??= DEFAULT_VOLUME_SIZE_MB;
    spec.region ??= regions[0];
  },
  async validate(next, _prev, ctx) {
    return regionIssues(next.spec.region, ctx);
  },
} satisfies KindDescriptor;
