// The contract every resource kind fills in. A kind is data handed to the generic store and routes
// (Kubernetes' strategy pattern): schemas, defaults, validation, immutable paths and secret paths.
import type { TObject, TSchema } from '@sinclair/typebox';
import type { FieldIssue } from '../errors.js';

export type Role = 'viewer' | 'member' | 'admin';

/** A path parameter that names a parent object, e.g. `vpcName` under `/vpcs/{vpcName}/...`. */
export interface ParentRef {
  param: string;
  kind: string;
  /** metadata field the server fills with the parent's name (e.g. `vpcName`). */
  metadataField: string;
}

/**
 * Where secret values live inside `spec`. Segments are property names, `*` for every array element
 * or every map value; `when` restricts array elements (e.g. env entries with `secret: true`).
 */
export interface SecretPath {
  path: string[];
  when?: (container: Record<string, unknown>) => boolean;
  /** The key of the secret value inside a matched container; absent = the matched value itself. */
  valueKey?: string;
  /**
   * What decides where the secret is sent: fields of the object `at` segments of `path` down (0 = the spec). A
   * write below the admin role that keeps a stored secret by sending it back redacted must leave them as they are
   * (a member must not move a secret it cannot read to an address of its own): it sends the secret again instead.
   */
  sentTo?: { at: number; fields: string[] };
  /**
   * Reads leave the value out instead of masking it (an emptied container goes too), and a replace whose body leaves
   * the container out keeps the stored values, as a masked echo would: the service's proxy routing secrets.
   */
  omittedOnRead?: boolean;
  /** The answer to the create that sent the value shows it (the caller just sent it): the same secrets. */
  echoedOnCreate?: boolean;
}

/** A URL a spec stores that Berth sends requests to for the user, with its JSON pointer into the body. */
export interface OutboundTarget {
  pointer: string;
  url: string;
}

export interface ValidationContext {
  workspace: string;
  regions: string[];
  /**
   * In a cluster, every region a node serves (docs/decisions/077-placement-regions.md): a sandbox, which is placed on
   * a node of its region, may name one another server serves. Undefined on one server.
   */
  nodeRegions?: ReadonlySet<string>;
  /** Looks up another object of the same workspace, e.g. a named volume or connection. */
  exists(kind: string, name: string): Promise<boolean>;
  /** The stored spec of another object of the workspace (secrets still sealed), when it exists. */
  specOf?(kind: string, name: string): Promise<any | undefined>;
}

export interface KindDescriptor {
  /** PascalCase kind name, e.g. `Sandbox`. Also the `kind:` of a YAML document. */
  kind: string;
  /** Lower-case plural used by the CLI (`berth get sandboxes`), e.g. `sandboxes`. */
  plural: string;
  /** Other names the CLI accepts (`sandbox`, `sbx`). */
  aliases?: string[];
  /** Collection path under /v0 with parent params, e.g. `/vpcs/{vpcName}/egressgateways`. */
  path: string;
  /** Path parameter that names the object, e.g. `gatewayName`. */
  nameParam: string;
  parents?: ParentRef[];
  /**
   * A collection path listing the kind's objects under every parent in the workspace (the service's
   * `/egressgateways` beside `/vpcs/{vpcName}/egressgateways`); only for kinds with parents.
   */
  everyParentPath?: string;
  description: string;
  spec: TObject;
  /** Extra metadata fields this kind returns (response only; writable ones go in `metadataInput`). */
  metadataExtra?: Record<string, TSchema>;
  /**
   * Extra metadata fields a client may write (e.g. a sandbox's `externalId`); a replace that omits one keeps the
   * stored value. `externalId` among them also gives the kind `GET .../by-external-id/{externalId}` and `?externalId=`.
   */
  metadataInput?: Record<string, TSchema>;
  /** Writable top-level fields beside metadata and spec. */
  extraInput?: Record<string, TSchema>;
  /** Read-only top-level fields beside status and events (e.g. sandbox `state`). */
  readOnly?: Record<string, TSchema>;
  /** Whether responses carry `status` and `events` (policies do not). */
  hasStatus: boolean;
  /** Fills defaults into a spec (a fresh copy, free to mutate). */
  defaults?: (spec: any, ctx: DefaultsContext) => void;
  /** Rules beyond the schema; pointers are into the whole body (`/spec/...`). */
  validate?: (
    next: any,
    prev: any | undefined,
    ctx: ValidationContext,
  ) => FieldIssue[] | Promise<FieldIssue[]>;
  /** Spec pointers that cannot change after creation (e.g. `/size`). */
  immutable?: string[];
  secrets?: SecretPath[];
  /**
   * The URLs of a spec Berth sends requests to (a callback, a provider's base URL, a git host): each new or changed
   * one is judged by the outbound rules before the write, a closed one a 422 naming its field (store/resources.ts).
   */
  outboundTargets?: (spec: any) => OutboundTarget[];
  /** Minimum role to create, replace or delete (default `member`). */
  writeRole?: Role;
  /** Minimum role to read (default `viewer`). */
  readRole?: Role;
  /** Adds fields computed at read time (e.g. `expiresIn`). */
  decorate?: (obj: any, nowMs: number) => void;
  /** The specification forbids these verbs for the kind. */
  readOnlyKind?: boolean;
  /** Objects of this kind are deleted with their parent; otherwise a child blocks the parent's delete (409). */
  cascade?: boolean;
  /** Fixed metadata the server writes on every write (e.g. a preview's `resourceType`). */
  stampMetadata?: (meta: Record<string, unknown>) => void;
  /**
   * Spec pointers only the server writes (e.g. a preview's `/url`): dropped from requests without a
   * warning, and kept from the stored object on a replace.
   */
  readOnlySpec?: string[];
  /** Names an object created without `metadata.name` (the service's SDK leaves it to the server). */
  generateName?: () => string;
  /** Non-envelope record kinds stored under `<parents>/<name>` of an object and removed with it. */
  ownedRecords?: string[];
  /**
   * Why the object may not be deleted now (e.g. a volume still attached), judged on the object as it is inside
   * the DELETE's transaction; a reason makes the DELETE a 409 that says it.
   */
  deleteRefusal?: (body: any) => string | undefined;
}

export interface DefaultsContext {
  /** Regions this server serves; the first is the default. */
  regions: string[];
}
