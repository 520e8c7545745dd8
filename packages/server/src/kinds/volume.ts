// Persistent volume (§2.10): durable storage attached to one sandbox at a time; size and region are fixed.
import { Type } from './typebox.js';
import { ExternalId, MESSAGE_KEY, opt, Quantity } from './common.js';
import { regionIssues, referenceIssues } from './rules.js';
import type { KindDescriptor } from './types.js';

/** MB; the service's SDK default. */
export const DEFAULT_VOLUME_SIZE_MB = 1024;
/** 1 TiB in MB: a bound on one local volume; quotas can lower it. */
export const MAX_VOLUME_SIZE_MB = 1024 * 1024;

export const VolumeSpec = Type.Object({
  infrastructureId: opt(Type.String()),
  region: opt(Type.String()),
  size: opt(Quantity('MB', { minimum: 1, maximum: MAX_VOLUME_SIZE_MB, example: DEFAULT_VOLUME_SIZE_MB })),
  /** A volume template name, optionally `<template>:<version>`. */
  template: opt(
    Type.String({
      pattern: '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(:[A-Za-z0-9._-]+)?$',
      [MESSAGE_KEY]:
        'must be a volume template name, optionally with :<version> (e.g. datasets or datasets:v2)',
    }),
  ),
});

export const templateNameOf = (ref: string | undefined) => ref?.split(':')[0];

export const volume = {
  kind: 'Volume',
  plural: 'volumes',
  aliases: ['volume', 'vol'],
  path: '/volumes',
  nameParam: 'volumeName',
  description: 'Persistent volume attachable to sandboxes; survives sandbox deletion.',
  spec: VolumeSpec,
  hasStatus: true,
  // The service's caller-owned id: `GET /volumes/by-external-id/{id}` and `?externalId=` (decision 024).
  metadataInput: { externalId: ExternalId },
  immutable: ['/size', '/region'],
  readOnly: {
    state: Type.Object({ attachedTo: opt(Type.String()) }),
    terminatedAt: Type.String(),
    /**
     * In a cluster, the node whose disk holds the volume's data (the one that made it): what mounts the volume runs
     * there (docs/decisions/102-volumes-stay-on-their-node.md).
     */
    node: Type.String(),
  },
  deleteRefusal(body) {
    const holder = body.state?.attachedTo;
    if (holder)
      return `volume ${JSON.stringify(body.metadata?.name)} is attached to ${holder}; delete or stop it first`;
  },
  defaults(spec, { regions }) {
    spec.size ??= DEFAULT_VOLUME_SIZE_MB;
    spec.region ??= regions[0];
  },
  async validate(next, prev, ctx) {
    const s = next.spec;
    return [
      ...regionIssues(s.region, ctx),
      ...(await referenceIssues(
        ctx,
        'VolumeTemplate',
        [templateNameOf(s.template)],
        [templateNameOf(prev?.spec.template)],
        () => '/spec/template',
      )),
    ];
  },
} satisfies KindDescriptor;
