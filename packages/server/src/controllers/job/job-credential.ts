// Each execution's task credential (BL_API_KEY in its tasks): an API key whose only right is to read that execution
// (auth/execution-scope.ts), kept as a hash like every key, expiring, and revoked in the same write that ends the
// execution. The plaintext lives only in the runner's memory and the tasks' environment: a restarted server issues
// a new one for the tasks it starts and keeps the old one valid for attempts it re-adopts.
import { newApiKey, sha256 } from '../../auth/credentials.js';
import { type ApiKeyHashRecord, keys } from '../../auth/records.js';
import type { Store, WriteOp } from '../../store/store.js';

/**
 * How long a task credential is issued for beyond the attempt that needs it: long enough for any attempt the job's
 * timeout allows plus reading the result afterwards, short enough that a copy leaked from a task's output does not
 * stay useful for days if the execution somehow never ends.
 */
export const TASK_CREDENTIAL_TTL_MS = 24 * 3600_000;

export interface TaskCredential {
  key: string;
  hash: string;
  expiresAt: number;
}

export const credentialSubject = (workspace: string, job: string, id: string) =>
  `job-execution:${workspace}/${job}/${id}`;

/** A fresh credential valid until `validMs` from now (at least the TTL), and the write that makes it valid. */
export function issueCredential(
  workspace: string,
  job: string,
  id: string,
  nowMs: number,
  validMs: number,
): { cred: TaskCredential; op: WriteOp } {
  const key = newApiKey();
  const hash = sha256(key);
  const expiresAt = nowMs + Math.max(validMs, TASK_CREDENTIAL_TTL_MS);
  const body: ApiKeyHashRecord = {
    id: `task-${id}`,
    sub: credentialSubject(workspace, job, id),
    subType: 'service_account',
    workspace,
    expiresAt,
    scope: { job, execution: id },
  };
  return {
    cred: { key, hash, expiresAt },
    op: { op: 'create', key: keys.apiKeyHash(hash), body: { ...body } },
  };
}

/** The deletes that revoke these credentials, for those still there (a delete of a missing key fails a write). */
export async function revokeOps(store: Store, hashes: string[]): Promise<WriteOp[]> {
  const there = await Promise.all(hashes.map((h) => store.get(keys.apiKeyHash(h))));
  return hashes.filter((_, i) => there[i]).map((h) => ({ op: 'delete', key: keys.apiKeyHash(h) }));
}
