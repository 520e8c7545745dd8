// The signed-in session of this tab: the API key and the workspace acted in. Kept in sessionStorage only (gone
// when the tab closes, never shared with another tab, never in a cookie or a URL) and sent only as Authorization.
export interface Session {
  key: string;
  workspace: string;
}

const STORAGE_KEY = 'berth.console.session';

let current: Session | null = read();
const listeners = new Set<() => void>();

function read(): Session | null {
  try {
    const raw = sessionStorage.getItem(STORAGE_KEY);
    const s = raw ? JSON.parse(raw) : null;
    return s && typeof s.key === 'string' && typeof s.workspace === 'string' ? s : null;
  } catch {
    return null;
  }
}

export function getSession(): Session | null {
  return current;
}

export function setSession(s: Session | null) {
  current = s;
  if (s) sessionStorage.setItem(STORAGE_KEY, JSON.stringify(s));
  else sessionStorage.removeItem(STORAGE_KEY);
  for (const fn of listeners) fn();
}

export function onSessionChange(fn: () => void): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}
