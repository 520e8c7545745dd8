// Who is signed in and what their role lets them do in the workspace: pages show only the actions it allows.
import { createContext, type ReactNode, useContext } from 'react';

export type Role = 'viewer' | 'member' | 'admin';

export interface Caller {
  subject: string;
  subjectType: string;
  homeWorkspace: string;
  workspace: string;
  role: Role;
}

const RANK: Record<Role, number> = { viewer: 0, member: 1, admin: 2 };

const CallerContext = createContext<Caller | null>(null);

export function CallerProvider({ caller, children }: { caller: Caller; children: ReactNode }) {
  return <CallerContext.Provider value={caller}>{children}</CallerContext.Provider>;
}

export function useCaller(): Caller {
  const c = useContext(CallerContext);
  if (!c) throw new Error('useCaller outside CallerProvider');
  return c;
}

/** Whether the caller's role is at least `need` (a viewer sees no button that would fail). */
export function useCan(need: Role): boolean {
  return RANK[useCaller().role] >= RANK[need];
}
