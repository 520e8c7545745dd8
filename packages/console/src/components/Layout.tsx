// The frame of every page: navigation (a sidebar, a menu in a narrow window), the workspace, role and theme.
import { type ReactNode, useEffect, useState } from 'react';
import { Link, useLocation } from 'wouter';
import { get } from '../api/client';
import { getSession, setSession } from '../api/session';
import { useCaller } from '../state/caller';
import { getTheme, setTheme, type Theme } from '../state/theme';
import { Icon } from './Icon';
import { Logo } from './Logo';

const NAV: { group: string; items: { to: string; label: string; icon: string }[] }[] = [
  { group: '', items: [{ to: '/', label: 'Overview', icon: 'overview' }] },
  {
    group: 'Compute',
    items: [
      { to: '/sandboxes', label: 'Sandboxes', icon: 'sandbox' },
      { to: '/agents', label: 'Agents', icon: 'agent' },
      { to: '/functions', label: 'MCP servers', icon: 'mcp' },
      { to: '/jobs', label: 'Jobs', icon: 'job' },
    ],
  },
  {
    group: 'AI',
    items: [
      { to: '/models', label: 'Models', icon: 'model' },
      { to: '/policies', label: 'Policies', icon: 'policy' },
      { to: '/connections', label: 'Connections', icon: 'connection' },
    ],
  },
  {
    group: 'Storage',
    items: [
      { to: '/volumes', label: 'Volumes', icon: 'volume' },
      { to: '/drives', label: 'Drives', icon: 'drive' },
      { to: '/images', label: 'Images', icon: 'image' },
    ],
  },
  {
    group: 'Access',
    items: [
      { to: '/api-keys', label: 'API keys', icon: 'key' },
      { to: '/members', label: 'Members', icon: 'members' },
    ],
  },
];

function isActive(loc: string, to: string) {
  return to === '/' ? loc === '/' : loc === to || loc.startsWith(`${to}/`);
}

export function Layout({ children }: { children: ReactNode }) {
  const caller = useCaller();
  const [loc] = useLocation();
  const [open, setOpen] = useState(false);
  const [theme, setT] = useState<Theme>(getTheme);
  const [workspaces, setWorkspaces] = useState<string[]>([caller.workspace]);
  useEffect(() => {
    get<{ name: string }[]>('/workspaces').then(
      (l) => setWorkspaces(l.map((w) => w.name)),
      () => undefined,
    );
  }, []);
  // biome-ignore lint/correctness/useExhaustiveDependencies: close the menu on navigation
  useEffect(() => setOpen(false), [loc]);

  const nextTheme: Record<Theme, Theme> = { system: 'dark', dark: 'light', light: 'system' };
  return (
    <div className={`shell${open ? ' nav-open' : ''}`}>
      <a href="#main" className="skip-link">
        Skip to content
      </a>
      <aside className="sidebar" aria-label="Navigation">
        <div className="brand">
          <Logo />
          <span>Berth</span>
        </div>
        <nav>
          {NAV.map((g) => (
            <div key={g.group} className="nav-group">
              {g.group ? <div className="nav-title">{g.group}</div> : null}
              {g.items.map((i) => (
                <Link
                  key={i.to}
                  href={i.to}
                  className={`nav-link${isActive(loc, i.to) ? ' active' : ''}`}
                  aria-current={isActive(loc, i.to) ? 'page' : undefined}
                >
                  <span className="nav-icon">
                    <Icon name={i.icon} />
                  </span>
                  {i.label}
                </Link>
              ))}
            </div>
          ))}
        </nav>
      </aside>
      <div className="main-col">
        <header className="topbar">
          <button
            type="button"
            className="btn btn-ghost menu-btn"
            aria-label="Menu"
            aria-expanded={open}
            onClick={() => setOpen(!open)}
          >
            ☰
          </button>
          <label className="ws-picker">
            <span className="visually-hidden">Workspace</span>
            <select
              value={caller.workspace}
              onChange={(e) => {
                const s = getSession();
                if (s) setSession({ ...s, workspace: e.target.value });
              }}
            >
              {workspaces.map((w) => (
                <option key={w} value={w}>
                  {w}
                </option>
              ))}
            </select>
          </label>
          <span className={`role-badge role-${caller.role}`} title={`Signed in as ${caller.subject}`}>
            {caller.role}
          </span>
          <div className="topbar-spacer" />
          <button
            type="button"
            className="btn btn-ghost btn-sm"
            onClick={() => {
              const t = nextTheme[theme];
              setTheme(t);
              setT(t);
            }}
            aria-label={`Theme: ${theme}`}
            title={`Theme: ${theme}`}
          >
            {theme === 'dark' ? '☾' : theme === 'light' ? '☀' : '◐'}{' '}
            <span className="hide-narrow">{theme}</span>
          </button>
          <button type="button" className="btn btn-ghost btn-sm" onClick={() => setSession(null)}>
            Sign out
          </button>
        </header>
        <main id="main" className="content" tabIndex={-1}>
          {children}
        </main>
      </div>
    </div>
  );
}
