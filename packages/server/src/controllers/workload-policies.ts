// What an agent's, function's or job's `spec.policies` and `spec.integrationConnections` mean when it runs:
// whether its policies let it run on this server (location, flavor, and no token limit it cannot honour), and
// the environment its connections give its processes (decision 030).
import { CONNECTION_KIND } from '../models/connections.js';
import { appliesTo, locationDenial, POLICY_DENIED, type PolicyBody } from '../models/policies.js';
import { allowsBerthFlavor, BERTH_FLAVOR } from '../kinds/policy.js';
import { isOAuth2 } from '../kinds/oauth2.js';
import { tokenFilePath } from '../oauth/bindings.js';
import type { Resources } from '../store/resources.js';

/** Prefix of every variable a connection gives a replica or task: BL_CONNECTION_<CONNECTION>_<KEY>. */
export const CONNECTION_ENV_PREFIX = 'BL_CONNECTION_';

/** `my-conn` / `apiKey` / `base_url` → `MY_CONN` / `API_KEY` / `BASE_URL` (camelCase split, others to `_`). */
export const envWord = (s: string) =>
  s
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/[^A-Za-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .toUpperCase();

/**
 * Why the workload may not run here, or undefined. Every reason starts with POLICY_DENIED and names the
 * policy, so the FAILED event says which one to change.
 */
export async function workloadPolicyDenial(
  resources: Resources,
  workspace: string,
  kind: string,
  spec: any,
): Promise<string | undefined> {
  const resourceType = kind.toLowerCase();
  const policies: PolicyBody[] = [];
  for (const n of spec?.policies ?? []) {
    const p = await resources.get(resources.kind('Policy'), workspace, [], n);
    if (!p) return `${POLICY_DENIED}: policy ${JSON.stringify(n)} does not exist (spec.policies)`;
    policies.push(p.body as PolicyBody);
  }
  const applying = policies.filter((p) => appliesTo(p, resourceType));
  for (const p of applying) {
    if (p.spec.type === 'maxToken')
      return `${POLICY_DENIED}: policy ${JSON.stringify(p.metadata.name)} is a maxToken policy, which cannot limit a ${resourceType} (token limits apply to model endpoints)`;
    const flavors = (p.spec as { flavors?: { name: string; type?: string }[] }).flavors;
    if (p.spec.type === 'flavor' && !allowsBerthFlavor(flavors))
      return `${POLICY_DENIED}: flavor policy ${JSON.stringify(p.metadata.name)} allows ${(flavors ?? []).map((f) => f.name).join(', ') || 'no flavor'}; this server runs on ${BERTH_FLAVOR.name} only`;
  }
  return locationDenial(applying, resources.regions, resourceType);
}

/** Whether the object's FAILED status came from its policies (and so clears when they allow it again). */
export const failedByPolicy = (body: any) =>
  body?.status === 'FAILED' && String(body.events?.at(-1)?.message ?? '').startsWith(POLICY_DENIED);

/**
 * The environment the workload's connections give it: each connection's `spec.config` (string, number and
 * boolean values) and decrypted `spec.secret` keys, as BL_CONNECTION_<CONNECTION>_<KEY>. An OAuth2 connection gives
 * no secret (its refresh token and client secret stay with Berth): BL_CONNECTION_<CONNECTION>_TOKEN_FILE names the
 * file that holds a fresh access token (oauth/bindings.ts). A connection that no longer exists is an error the caller
 * reports (its values would otherwise vanish silently).
 */
export async function connectionEnvs(
  resources: Resources,
  workspace: string,
  names: string[] | undefined,
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const kd = resources.kind(CONNECTION_KIND);
  for (const n of names ?? []) {
    const o = await resources.get(kd, workspace, [], n);
    if (!o) throw new MissingConnectionError(n);
    const spec = resources.openSecrets(kd, o.body.spec ?? {});
    const prefix = `${CONNECTION_ENV_PREFIX}${envWord(n)}_`;
    for (const [k, v] of Object.entries((spec.config ?? {}) as Record<string, unknown>))
      if (['string', 'number', 'boolean'].includes(typeof v)) out[prefix + envWord(k)] = String(v);
    if (isOAuth2(spec.integration)) {
      out[`${prefix}TOKEN_FILE`] = tokenFilePath(n);
      continue;
    }
    for (const [k, v] of Object.entries((spec.secret ?? {}) as Record<string, unknown>))
      if (typeof v === 'string') out[prefix + envWord(k)] = v;
  }
  return out;
}

export class MissingConnectionError extends Error {
  constructor(readonly connection: string) {
    super(
      `integration connection ${JSON.stringify(connection)} does not exist (spec.integrationConnections)`,
    );
  }
}
