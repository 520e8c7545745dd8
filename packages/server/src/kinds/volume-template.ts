// Volume template (§2.11): a pre-filled volume source with versions (api/volume-template-versions.ts).
import { Type } from './typebox.js';
import { opt, Quantity } from './common.js';
import { DEFAULT_VOLUME_SIZE_MB, MAX_VOLUME_SIZE_MB } from './volume.js';
import type { KindDescriptor } from './types.js';

export const VolumeTemplateVersion = Type.Object({
  bucket: opt(Type.String()),
  contentSize: opt(Type.Integer({ minimum: 0 })),
  name: Type.String(),
  region: opt(Type.String()),
  templateName: Type.String(),
  versionId: Type.String(),
  workspace: Type.String(),
});

export const VolumeTemplateState = Type.Object({
  lastVersionUploadedAt: opt(Type.String()),
  latestVersion: opt(Type.String()),
  versionCount: opt(Type.Integer({ minimum: 0 })),
});

export const volumeTemplate = {
  kind: 'VolumeTemplate',
  plural: 'volumetemplates',
  aliases: ['volumetemplate', 'volume_templates', 'volume-templates', 'vt'],
  path: '/volume_templates',
  nameParam: 'volumeTemplateName',
  description: 'Pre-configured volume source with versions.',
  spec: Type.Object({
    defaultSize: opt(
      Quantity('MB', { minimum: 1, maximum: MAX_VOLUME_SIZE_MB, example: DEFAULT_VOLUME_SIZE_MB }),
    ),
    description: opt(Type.String({ maxLength: 1000 })),
  }),
  // §2.11 lists no status or events for templates; versions say what is uploaded.
  hasStatus: false,
  readOnly: { state: VolumeTemplateState, versions: Type.Array(VolumeTemplateVersion) },
  defaults(spec) {
    spec.defaultSize ??= DEFAULT_VOLUME_SIZE_MB;
  },
  decorate(obj) {
    obj.state ??= { versionCount: 0 };
    obj.versions ??= [];
  },
} satisfies KindDescriptor;
