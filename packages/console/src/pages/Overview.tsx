// Everything in the workspace at a glance, live: counts per kind and status, sandboxes awake vs in standby,
// failing objects first, recent events. One GET /v0/watch (initial objects, then changes).
import { useEffect, useMemo, useRef, useState } from 'react';
import { Link } from 'wouter';
import { watch } from '../api/watch';
import { ago, when } from '../components/format';
import { Card, Empty, PageHead } from '../components/Page';
import { ProblemBanner } from '../components/ProblemBanner';
import { StatusBadge } from '../components/Status';
import { useCaller } from '../state/caller';

const KINDS: { kind: string; plural: string; label: string; to: string }[] = [
  { kind: 'Sandbox', plural: 'sandboxes', label: 'Sandboxes', to: '/sandboxes' },
  { kind: 'Agent', plural: 'agents', label: 'Agents', to: '/agents' },
  { kind: 'Function', plural: 'functions', label: 'MCP servers', to: '/functions' },
  { kind: 'Job', plural: 'jobs', label: 'Jobs', to: '/jobs' },
  { kind: 'Model', plural: 'models', label: 'Models', to: '/models' },
  { kind: 'Volume', plural: 'volumes', label: 'Volumes', to: '/volumes' },
  { kind: 'Drive', plural: 'drives', label: 'Drives', to: '/drives' },
  { kind: 'Policy', plural: 'policies', label: 'Policies', to: '/policies' },
];
const LINK: Record<string, string> = Object.fromEntries(KINDS.map((k) => [k.kind, k.to]));

export default function Overview() {
  const caller = useCaller();
  const objects = useRef(new Map<string, { kind: string; object: any }>());
  const [tick, setTick] = useState(0);
  const [synced, setSynced] = useState(false);
  const [error, setError] = useState<unknown>();

  useEffect(() => {
    const ac = new AbortController();
    let pending: ReturnType<typeof setTimeout> | undefined;
    const bump = () => {
      pending ??= setTimeout(() => {
        pending = undefined;
        setTick((t) => t + 1);
      }, 100);
    };
    watch(
      KINDS.map((k) => k.plural),
      { initial: true },
      {
        onEvent(e) {
          const key = `${e.kind}/${e.object.metadata?.name}`;
          if (e.type === 'DELETED') objects.current.delete(key);
          else objects.current.set(key, { kind: e.kind, object: e.object });
          bump();
        },
        onSynced() {
          setSynced(true);
          setError(undefined);
          bump();
        },
        onError: setError,
      },
      ac.signal,
    );
    return () => {
      ac.abort();
      clearTimeout(pending);
    };
  }, []);

  // biome-ignore lint/correctness/useExhaustiveDependencies: tick is what changes when objects do
  const view = useMemo(() => {
    const all = [...objects.current.values()];
    const counts = new Map<string, Map<string, number>>();
    for (const { kind, object } of all) {
      const m = counts.get(kind) ?? new Map();
      const st = object.status ?? '—';
      m.set(st, (m.get(st) ?? 0) + 1);
      counts.set(kind, m);
    }
    const sandboxes = all.filter((o) => o.kind === 'Sandbox').map((o) => o.object);
    const awake = sandboxes.filter((s) => s.state === 'RUNNING').length;
    const standby = sandboxes.filter((s) => s.state === 'STANDBY').length;
    const failing = all.filter((o) => o.object.status === 'FAILED');
    const events = all
      .flatMap(({ kind, object }) =>
        (object.events ?? []).map((e: any) => ({ ...e, kind, name: object.metadata?.name })),
      )
      .sort((a, b) => String(b.time).localeCompare(String(a.time)))
      .slice(0, 14);
    return { counts, awake, standby, failing, events, total: sandboxes.length };
  }, [tick]);

  return (
    <div className="stack">
      <PageHead
        title="Overview"
        sub={`Workspace ${caller.workspace}: what runs now, as the API reports it, live.`}
      />
      <ProblemBanner error={error} />
      <div className="grid grid-4">
        <div className="card stat">
          <div className="stat-label">Sandboxes awake</div>
          <div className="stat-value">{synced ? view.awake : '…'}</div>
          <div className="stat-sub">
            {view.standby} in standby · {view.total} in all
          </div>
        </div>
        {KINDS.slice(1, 4).map((k) => {
          const m = view.counts.get(k.kind);
          const n = m ? [...m.values()].reduce((a, b) => a + b, 0) : 0;
          return (
            <Link key={k.kind} href={k.to} className="card stat">
              <div className="stat-label">{k.label}</div>
              <div className="stat-value">{synced ? n : '…'}</div>
              <div className="stat-sub">
                {m?.get('DEPLOYED') ?? 0} deployed · {m?.get('FAILED') ?? 0} failed
              </div>
            </Link>
          );
        })}
      </div>
      {view.failing.length ? (
        <Card title={`Failing (${view.failing.length})`} flush>
          <table className="table">
            <tbody>
              {view.failing.map(({ kind, object }) => (
                <tr key={`${kind}/${object.metadata.name}`}>
                  <td>
                    <Link href={`${LINK[kind] ?? '/'}/${object.metadata.name}`} className="name-cell">
                      {object.metadata.name}
                    </Link>
                  </td>
                  <td className="muted">{kind}</td>
                  <td>
                    <StatusBadge status="FAILED" />
                  </td>
                  <td>{object.events?.at(-1)?.message ?? ''}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </Card>
      ) : null}
      <div className="grid grid-2">
        <Card title="By kind and status" flush>
          <table className="table">
            <thead>
              <tr>
                <th>Kind</th>
                <th>Total</th>
                <th>Status</th>
              </tr>
            </thead>
            <tbody>
              {KINDS.map((k) => {
                const m = view.counts.get(k.kind);
                const n = m ? [...m.values()].reduce((a, b) => a + b, 0) : 0;
                return (
                  <tr key={k.kind}>
                    <td>
                      <Link href={k.to}>{k.label}</Link>
                    </td>
                    <td>{synced ? n : '…'}</td>
                    <td>
                      <div className="row">
                        {[...(m?.entries() ?? [])]
                          .filter(([st]) => st !== '—')
                          .map(([st, c]) => (
                            <span key={st} className="row">
                              <StatusBadge status={st} />
                              <span className="muted">{c}</span>
                            </span>
                          ))}
                      </div>
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </Card>
        <Card title="Recent events" flush>
          {view.events.length ? (
            <ul className="event-list">
              {view.events.map((e) => (
                <li key={`${e.kind}|${e.name}|${e.time}|${e.status}|${e.message}`}>
                  <span className="event-time" title={when(e.time)}>
                    {ago(e.time)}
                  </span>
                  <span>
                    <Link href={`${LINK[e.kind] ?? '/'}/${e.name}`}>{e.name}</Link>{' '}
                    {e.status ? <StatusBadge status={e.status} /> : null}{' '}
                    <span className="muted">{e.message}</span>
                  </span>
                </li>
              ))}
            </ul>
          ) : (
            <Empty>{synced ? 'Nothing has happened yet.' : 'Loading…'}</Empty>
          )}
        </Card>
      </div>
    </div>
  );
}
