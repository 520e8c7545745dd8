// First start: workspace `default`, service account `admin` (role admin) and one API key for it.
// The key is written once to <dataDir>/admin.key (0600) and returned once, so it can be printed once.
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { type Store, StoreError, type WriteOp } from '../store/store.js';
import { newApiKey, newClientId, newClientSecret, newKeyId, sha256 } from './credentials.js';
import {
  type ApiKeyHashRecord,
  type ApiKeyRecord,
  keys,
  memberOps,
  type ServiceAccountRecord,
  stamps,
  type WorkspaceRecord,
} from './records.js';

export const DEFAULT_WORKSPACE = 'default';
export const ADMIN_KEY_FILE = 'admin.key';
const SYSTEM = 'system';

export async function bootstrap(deps: { store: Store; dataDir: string; logger: Logger; now?: () => Date }) {
  const { store, logger } = deps;
  if (await store.get(keys.workspace(DEFAULT_WORKSPACE))) return {};
  const now = deps.now?.() ?? new Date();
  const ws = DEFAULT_WORKSPACE;
  const clientId = newClientId();
  const keyId = newKeyId();
  const apiKey = newApiKey();
  const hash = sha256(apiKey);
  const st = stamps(SYSTEM, now);
  const sa: ServiceAccountRecord = {
    client_id: clientId,
    name: 'admin',
    description: 'created at first start',
    workspace: ws,
    // Nobody ever saw this secret: the account authenticates with its API key until an admin rotates it.
    secretHash: sha256(newClientSecret()),
    created_at: st.createdAt,
    updated_at: st.updatedAt,
    created_by: SYSTEM,
  };
  const keyRec: ApiKeyRecord = {
    id: keyId,
    name: 'bootstrap',
    hash,
    sub: clientId,
    sub_type: 'service_account',
    ...st,
  };
  const index: ApiKeyHashRecord = { id: keyId, sub: clientId, subType: 'service_account', workspace: ws };
  const ops: WriteOp[] = [
    {
      op: 'create',
      key: keys.workspace(ws),
      body: { name: ws, displayName: 'Default', ...st } satisfies WorkspaceRecord,
    },
    { op: 'create', key: keys.serviceAccount(ws, clientId), body: { ...sa } },
    { op: 'create', key: keys.clientId(clientId), body: { workspace: ws } },
    ...memberOps(ws, { subject: clientId, subType: 'service_account', role: 'admin', ...st }, false),
    { op: 'create', key: keys.apiKey(ws, clientId, keyId), body: { ...keyRec } },
    { op: 'create', key: keys.apiKeyHash(hash), body: { ...index } },
  ];
  try {
    await store.write(ops);
  } catch (e) {
    // Another server of the cluster bootstrapped the shared database first: its admin key is the one.
    if (e instanceof StoreError && e.reason === 'exists') return {};
    throw e;
  }
  const file = join(deps.dataDir, ADMIN_KEY_FILE);
  writeAdminKey(file, apiKey, logger);
  logger.info(
    { file, workspace: ws, clientId },
    'first start: created workspace, admin service account and API key',
  );
  return { adminKey: apiKey };
}

/** 'wx' never overwrites; a stale file from an earlier data directory is moved aside, not lost. */
function writeAdminKey(file: string, apiKey: string, logger: Logger) {
  try {
    writeFileSync(file, `${apiKey}\n`, { mode: 0o600, flag: 'wx' });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    const aside = `${file}.${Date.now()}.old`;
    renameSync(file, aside);
    logger.warn({ file, aside }, 'an admin key file from an earlier store was moved aside');
    writeFileSync(file, `${apiKey}\n`, { mode: 0o600, flag: 'wx' });
  }
}
