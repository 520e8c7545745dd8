// Where a connection's current access token is kept for the replicas bound to it: one directory per workspace and
// connection, `<dataDir>/oauth/<ws>/<connection>/`, mounted read-only into each replica. A refresh renames a new file
// in, so a reader sees the old token or the new one, never half of either.
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NAME_PATTERN } from '../kinds/common.js';

const LABEL = new RegExp(NAME_PATTERN);
/** The file holding the bare access token (no newline). */
export const ACCESS_TOKEN_FILE = 'access_token';

export const oauthRoot = (dataDir: string) => join(dataDir, 'oauth');

/** The directory of one connection's token; names are checked to be DNS labels before they become a path. */
export function tokenDir(dataDir: string, workspace: string, connection: string): string {
  if (!LABEL.test(workspace) || !LABEL.test(connection))
    throw new Error(`not a workspace and connection name: ${JSON.stringify([workspace, connection])}`);
  return join(oauthRoot(dataDir), workspace, connection);
}

/** Writes the token (atomically: a new file renamed over the old one). */
export function writeTokenFile(dir: string, token: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const tmp = join(dir, `.${ACCESS_TOKEN_FILE}.${process.pid}.tmp`);
  writeFileSync(tmp, token, { mode: 0o600 });
  renameSync(tmp, join(dir, ACCESS_TOKEN_FILE));
}

/** Removes the token; the directory stays while a replica may have it mounted. */
export function clearTokenFile(dir: string): void {
  rmSync(join(dir, ACCESS_TOKEN_FILE), { force: true });
}

export function removeTokenDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}
