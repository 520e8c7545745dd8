// Registry credentials from the operator's file (BERTH_REGISTRY_AUTH_FILE): `{"<registry>": {"username": …,
// "password": …}}`. Read once at start; refused when others may read it, as ssh refuses a readable key.
import { readFileSync, statSync } from 'node:fs';
import type { RegistryCredentials } from './registry.js';

export function readRegistryAuth(file: string | undefined): Record<string, RegistryCredentials> | undefined {
  if (!file) return undefined;
  if ((statSync(file).mode & 0o077) !== 0)
    throw new Error(`registry auth file ${file} may be read by others: chmod 600 it`);
  const doc = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  const out: Record<string, RegistryCredentials> = {};
  for (const [host, v] of Object.entries(doc)) {
    const c = v as Partial<RegistryCredentials>;
    if (typeof c?.username !== 'string' || typeof c?.password !== 'string')
      throw new Error(`registry auth file ${file}: ${host} needs a username and a password`);
    out[host] = { username: c.username, password: c.password };
  }
  return out;
}
