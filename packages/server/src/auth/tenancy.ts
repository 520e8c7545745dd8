// Whose consent a membership needs (docs/security.md, "Tenancy"). A principal belongs to the tenant of its home
// workspace: the admins there create it, mint its keys and can delete it, so they (and the principal itself) may
// act for it. Anyone else offering it a role sends an invitation, which grants nothing until one of them accepts.
import type { Store } from '../store/store.js';
import { keys, type MemberRecord } from './records.js';

/** The home workspace of a principal, or undefined when no such principal exists. */
export async function homeOf(store: Store, subject: string): Promise<string | undefined> {
  return (await store.get(keys.clientId(subject)))?.body.workspace as string | undefined;
}

/** True when `actor` may consent for `subject`: it is the subject, or an admin of the subject's home workspace. */
export async function mayActFor(store: Store, actor: string, subject: string): Promise<boolean> {
  if (actor === subject) return true;
  const home = await homeOf(store, subject);
  if (!home) return false;
  const m = await store.get(keys.member(home, actor));
  return (m?.body as MemberRecord | undefined)?.role === 'admin';
}
