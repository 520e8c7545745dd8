// The kinds the server serves, as data (kinds.json, generated with the rest of the SDK from the server's registry):
// each kind's names, collection path and parents. The CLI works on whatever kind a user names from this table, without
// loading the server's code.
import { createRequire } from 'node:module';

export interface KindParent {
  /** The path parameter naming the parent, e.g. `sandboxName`. */
  param: string;
  kind: string;
  /** The metadata field the server fills with the parent's name (e.g. `vpcName`). */
  metadataField: string;
}

export interface KindInfo {
  /** PascalCase, as in a YAML document's `kind:`. */
  kind: string;
  plural: string;
  aliases: string[];
  /** Collection path under /v0 with its parents' parameters, e.g. `/vpcs/{vpcName}/egressgateways`. */
  path: string;
  nameParam: string;
  parents: KindParent[];
  /** Whether objects carry `status` and `events` (policies do not). */
  hasStatus: boolean;
  /** Read-only kinds have no create, replace or delete. */
  readOnlyKind: boolean;
  /** Writable top-level fields beside metadata and spec. */
  extraInput: string[];
}

// require() of JSON: the same file from src/ and dist/, and no warning (an ES JSON import still warns on Node 20).
export const KINDS: KindInfo[] = createRequire(import.meta.url)('../kinds.json');

/** A kind by PascalCase name, plural or alias (`Policy`, `policies`, `pol`), any case. */
export function kindByName(name: string): KindInfo | undefined {
  const n = name.toLowerCase();
  return KINDS.find((k) => k.kind.toLowerCase() === n || k.plural === n || k.aliases.includes(n));
}
