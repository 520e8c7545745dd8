// The template catalog entry of §2.15, as the wire shows it. No Node dependencies: the SDK and CLI
// can import it.
import type { Static } from '@sinclair/typebox';
import { Type } from '../kinds/typebox.js';

export const TemplateVariable = Type.Object({
  name: Type.String({ minLength: 1 }),
  description: Type.String(),
  /** Where the value goes in the resource the template deploys (e.g. `spec.runtime.envs`). */
  path: Type.String(),
  /** The integration that supplies the value, `''` when the user types it. */
  integration: Type.String(),
  secret: Type.Boolean(),
});

export const Template = Type.Object(
  {
    name: Type.String({ pattern: '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$' }),
    description: Type.String(),
    topics: Type.Array(Type.String()),
    variables: Type.Array(TemplateVariable),
    icon: Type.String(),
    iconDark: Type.String(),
    url: Type.String(),
    defaultBranch: Type.String(),
    /** sha256 (hex) over the template's files: changes whenever any file does. */
    sha: Type.String(),
    downloadCount: Type.Integer({ minimum: 0 }),
    forksCount: Type.Integer({ minimum: 0 }),
    starCount: Type.Integer({ minimum: 0 }),
  },
  { $id: 'Template' },
);

export type Template = Static<typeof Template>;

/** What a `template.json` holds: everything but the computed `sha`. */
export const TemplateFile = Type.Omit(Template, ['sha']);
