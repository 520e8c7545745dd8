// From a stored integration connection to what a provider call needs: base URL, decrypted key, and a
// judgement of whether it can serve a model at all. The reconciler, the gateway and the model list share it.
import type { Resources } from '../store/resources.js';
import { type Connection, type Provider, providerFor } from './providers/index.js';

export const CONNECTION_KIND = 'IntegrationConnection';

/** Secret names read as the provider key, in order; else the only secret a connection holds. */
const KEY_NAMES = ['apiKey', 'api_key', 'apikey', 'API_KEY', 'key', 'token'];

export function keyOf(secret: Record<string, string> | undefined): string | undefined {
  if (!secret) return undefined;
  for (const n of KEY_NAMES) if (typeof secret[n] === 'string' && secret[n]) return secret[n];
  const named = Object.entries(secret).find(([k, v]) => /api.?key$/i.test(k) && v);
  if (named) return named[1];
  const values = Object.values(secret).filter(Boolean);
  return values.length === 1 ? values[0] : undefined;
}

export type Opened = { ok: true; connection: Connection; provider: Provider } | { ok: false; reason: string };

/** Reads and opens connection `name`; `reason` says why it cannot serve (missing, not a provider, no key). */
export async function openConnection(resources: Resources, workspace: string, name: string): Promise<Opened> {
  const kd = resources.kind(CONNECTION_KIND);
  const o = await resources.get(kd, workspace, [], name);
  if (!o) return { ok: false, reason: `integration connection ${JSON.stringify(name)} does not exist` };
  const spec = resources.openSecrets(kd, o.body.spec);
  const provider = providerFor(spec.integration);
  if (!provider)
    return {
      ok: false,
      reason: `integration connection ${JSON.stringify(name)} is a ${spec.integration} connection, not an LLM provider`,
    };
  const config = (spec.config ?? {}) as Record<string, unknown>;
  const baseUrl =
    typeof config.baseUrl === 'string' && config.baseUrl ? config.baseUrl : provider.defaultBaseUrl;
  if (!baseUrl)
    return {
      ok: false,
      reason: `integration connection ${JSON.stringify(name)} (${spec.integration}) needs spec.config.baseUrl`,
    };
  const apiKey = keyOf(spec.secret);
  if (!apiKey && !provider.keyOptional)
    return {
      ok: false,
      reason: `integration connection ${JSON.stringify(name)} holds no API key (spec.secret.apiKey)`,
    };
  const secretValues = Object.values((spec.secret ?? {}) as Record<string, string>).filter(
    (v) => typeof v === 'string' && v,
  );
  return {
    ok: true,
    provider,
    connection: {
      name,
      integration: spec.integration,
      baseUrl: baseUrl.replace(/\/+$/, ''),
      config,
      apiKey,
      secretValues,
    },
  };
}
