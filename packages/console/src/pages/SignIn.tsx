// Sign in with an API key: checked against GET /v0/caller, then a workspace picked among the caller's. The key is
// kept in this tab's sessionStorage only.
import { type FormEvent, useState } from 'react';
import { api } from '../api/client';
import { setSession } from '../api/session';
import { Logo } from '../components/Logo';
import { ProblemBanner } from '../components/ProblemBanner';

interface Workspace {
  name: string;
  displayName?: string;
}

export function SignIn({ reason }: { reason?: unknown }) {
  const [key, setKey] = useState('');
  const [workspaces, setWorkspaces] = useState<Workspace[] | null>(null);
  const [workspace, setWorkspace] = useState('');
  const [error, setError] = useState<unknown>(reason);
  const [busy, setBusy] = useState(false);

  async function check(e: FormEvent) {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const session = { key: key.trim(), workspace: '' };
      const caller = await api('GET', '/caller', { session });
      const list = await api<Workspace[]>('GET', '/workspaces', { session });
      setWorkspaces(list);
      setWorkspace(caller.workspace);
      if (list.length <= 1) setSession({ key: key.trim(), workspace: caller.workspace });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <main className="signin">
      <div className="signin-card card">
        <div className="signin-brand">
          <Logo size={36} />
          <div>
            <h1>Berth console</h1>
            <p className="muted">Sandboxes, agents, MCP servers, jobs and models, live.</p>
          </div>
        </div>
        {!workspaces ? (
          <form onSubmit={check} className="form">
            <label className="field">
              <span>API key</span>
              <input
                type="password"
                name="api-key"
                autoComplete="off"
                spellCheck={false}
                value={key}
                onChange={(e) => setKey(e.target.value)}
                placeholder="berth_…"
                required
                // biome-ignore lint/a11y/noAutofocus: the one field of the page
                autoFocus
              />
              <small className="muted">
                Kept in this tab only (sessionStorage) and sent as the Authorization header. Closing the tab
                signs you out.
              </small>
            </label>
            <ProblemBanner error={error} />
            <button className="btn btn-primary" type="submit" disabled={busy || !key.trim()}>
              {busy ? 'Checking…' : 'Sign in'}
            </button>
          </form>
        ) : (
          <form
            className="form"
            onSubmit={(e) => {
              e.preventDefault();
              setSession({ key: key.trim(), workspace });
            }}
          >
            <label className="field">
              <span>Workspace</span>
              <select value={workspace} onChange={(e) => setWorkspace(e.target.value)}>
                {workspaces.map((w) => (
                  <option key={w.name} value={w.name}>
                    {w.displayName ? `${w.displayName} (${w.name})` : w.name}
                  </option>
                ))}
              </select>
            </label>
            <button className="btn btn-primary" type="submit">
              Open workspace
            </button>
          </form>
        )}
      </div>
    </main>
  );
}
