// Schemas shared by several kinds, with the specification's exact field names.
import type { TSchema } from '@sinclair/typebox';
import { Type } from './typebox.js';
import { STATUSES } from './status.js';

/**
 * Schema annotation read by kinds/schema.ts: the one message any failure of this value gets, so it can say the
 * unit, the format and an example instead of Ajv's "must match pattern ...". (An `x-` key: OpenAPI allows it.)
 */
export const MESSAGE_KEY = 'x-message';

/** DNS label: the identity of an object within its workspace and kind (DESIGN.md §4). */
export const NAME_PATTERN = '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$';
export const NAME_MESSAGE =
  'must be a name of lowercase letters, digits and -, 1 to 63 characters, starting and ending with a letter or digit (e.g. my-sandbox)';
export const Name = Type.String({
  pattern: NAME_PATTERN,
  minLength: 1,
  maxLength: 63,
  [MESSAGE_KEY]: NAME_MESSAGE,
});

/** Durations such as 30s, 15m, 24h, 7d, 1w. */
export const DURATION_PATTERN = '^[0-9]+(s|m|h|d|w)$';
export const DURATION_MESSAGE = 'must be a duration like 30s, 15m, 24h, 7d (units s, m, h, d, w)';
export const Duration = Type.String({ pattern: DURATION_PATTERN, [MESSAGE_KEY]: DURATION_MESSAGE });

export const TIMESTAMP_MESSAGE = 'must be an ISO 8601 date-time like 2030-01-31T12:00:00Z';
export const Timestamp = Type.String({ format: 'date-time', [MESSAGE_KEY]: TIMESTAMP_MESSAGE });

/**
 * A whole number in a unit (MB, seconds): every failure says the unit, the bounds and an example, e.g.
 * "must be a whole number of MB from 128 to 65536 (e.g. 4096)".
 */
export function Quantity(unit: string, o: { minimum: number; maximum?: number; example: number }) {
  const range = o.maximum === undefined ? `, at least ${o.minimum}` : ` from ${o.minimum} to ${o.maximum}`;
  return Type.Integer({
    minimum: o.minimum,
    ...(o.maximum === undefined ? {} : { maximum: o.maximum }),
    description: `in ${unit}`,
    [MESSAGE_KEY]: `must be a whole number of ${unit}${range} (e.g. ${o.example})`,
  });
}
export const StringMap = Type.Record(Type.String(), Type.String());

export const Labels = Type.Record(
  Type.String({ maxLength: 63, minLength: 1 }),
  Type.String({ maxLength: 253 }),
);

/** metadata fields a client may send. */
export const MetadataInput = {
  name: Name,
  displayName: Type.Optional(Type.String({ maxLength: 253 })),
  labels: Type.Optional(Labels),
  resourceVersion: Type.Optional(Type.String()),
};

/**
 * A caller-owned identifier to find an object by (the service's `metadata.externalId`): at most 64 letters, digits,
 * `.`, `_`, `:` or `-`, so it is safe in a URL path segment as it is.
 */
export const ExternalId = Type.String({
  pattern: '^[A-Za-z0-9._:-]{1,64}$',
  [MESSAGE_KEY]: 'must be 1 to 64 letters, digits, ".", "_", ":" or "-"',
});

/** metadata fields the server writes. */
export const MetadataReadOnly = {
  createdAt: Type.Optional(Type.String()),
  updatedAt: Type.Optional(Type.String()),
  createdBy: Type.Optional(Type.String()),
  updatedBy: Type.Optional(Type.String()),
  plan: Type.Optional(Type.String()),
  url: Type.Optional(Type.String()),
  workspace: Type.Optional(Type.String()),
  generation: Type.Optional(Type.Integer()),
};

export const Env = Type.Object({
  name: Type.String({
    minLength: 1,
    pattern: '^[A-Za-z_][A-Za-z0-9_]*$',
    [MESSAGE_KEY]:
      'must be an environment variable name: letters, digits and _, not starting with a digit (e.g. API_URL)',
  }),
  value: Type.Optional(Type.String()),
  secret: Type.Optional(Type.Boolean()),
});

export const Port = Type.Object({
  target: Type.Integer({ minimum: 1, maximum: 65535 }),
  name: Type.Optional(Type.String()),
  protocol: Type.Optional(Type.Union([Type.Literal('HTTP'), Type.Literal('TCP')])),
});

/** An absolute path inside the sandbox. */
export const MountPath = Type.String({ pattern: '^/', [MESSAGE_KEY]: 'must be an absolute path like /data' });

export const VolumeMount = Type.Object({
  name: Name,
  mountPath: MountPath,
  readOnly: Type.Optional(Type.Boolean()),
});

export const Revision = Type.Object({
  active: Type.Optional(Type.String()),
  canary: Type.Optional(Type.String()),
  canaryPercent: Type.Optional(Type.Integer({ minimum: 0, maximum: 100 })),
  stickySessionTtl: Type.Optional(Type.Integer({ minimum: 0 })),
  traffic: Type.Optional(Type.Integer({ minimum: 0, maximum: 100 })),
});

export const Trigger = Type.Object({
  id: Type.Optional(Type.String()),
  // `cron` is what the service's SDK calls a schedule trigger; both are accepted.
  type: Type.Union([
    Type.Literal('http'),
    Type.Literal('http-async'),
    Type.Literal('schedule'),
    Type.Literal('cron'),
  ]),
  enabled: Type.Optional(Type.Boolean()),
  configuration: Type.Optional(
    Type.Object({
      authenticationType: Type.Optional(Type.Union([Type.Literal('public'), Type.Literal('private')])),
      callbackUrl: Type.Optional(
        Type.String({
          format: 'uri',
          [MESSAGE_KEY]: 'must be an absolute URL like https://example.com/hook',
        }),
      ),
      callbackSecret: Type.Optional(Type.String()),
      path: Type.Optional(Type.String()),
      retry: Type.Optional(Type.Integer({ minimum: 0, maximum: 20 })),
      /** Seconds (DESIGN.md §4). */
      schedule: Type.Optional(Type.String()),
      tasks: Type.Optional(Type.Array(Type.Record(Type.String(), Type.Unknown()))),
      timeout: Type.Optional(Quantity('seconds', { minimum: 1, example: 900 })),
    }),
  ),
});

export const NamedType = Type.Object({ name: Type.String(), type: Type.Optional(Type.String()) });

export const Event = Type.Object({
  type: Type.String(),
  status: Type.String(),
  message: Type.String(),
  revision: Type.Optional(Type.String()),
  canaryRevision: Type.Optional(Type.String()),
  time: Type.String(),
});

export const Status = Type.Union(STATUSES.map((s) => Type.Literal(s)));

/** Env entries whose `secret` is true hold their value encrypted. */
export const envSecrets = (...path: string[]) => ({
  path: [...path, '*'],
  when: (e: Record<string, unknown>) => e.secret === true,
  valueKey: 'value',
});

export const opt = <T extends TSchema>(t: T) => Type.Optional(t);

export const literals = (xs: readonly string[]) => Type.Union(xs.map((x) => Type.Literal(x)));

/** Memory in MB (DESIGN.md §4); CPU share follows it (memory / 2048 cores). */
export const MemoryMb = Quantity('MB', { minimum: 128, maximum: 65536, example: 4096 });

/** Infrastructure generation; the service's SDK sends `mk3`. Berth runs every generation the same way. */
export const Generation = Type.String({ minLength: 1, maxLength: 32 });

export const PROVIDER_TYPES = [
  'openai',
  'anthropic',
  'mistral',
  'gemini',
  'cohere',
  'xai',
  'deepseek',
  'groq',
  'azure-openai',
  'openai-compatible',
] as const;

/** Names of other objects (policies, connections). */
export const NameList = Type.Array(Name);
