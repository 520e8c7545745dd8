// How a sandbox object is named in the runtime: one id per (workspace, name), stable across restarts.
import { createHash } from 'node:crypto';

/** Longest id the runtime accepts (it becomes a file name and appears in kernel object names). */
const MAX_ID_LENGTH = 63;

/**
 * The runtime id of a sandbox: `<workspace>.<name>` (names hold no dots, so it is unambiguous), or a
 * hash when that would be too long. Deterministic, so a restarted server finds its sandboxes again.
 */
export function sandboxId(workspace: string, name: string): string {
  const id = `${workspace}.${name}`;
  if (id.length <= MAX_ID_LENGTH) return id;
  return `h-${createHash('sha256').update(`${workspace}/${name}`).digest('hex').slice(0, 40)}`;
}
