// One sandbox: its status and run state live, a terminal, files, processes, previews and memory/CPU charts.
import { lazy, Suspense } from 'react';
import { useLocation } from 'wouter';
import { api, get } from '../api/client';
import { ago, bytes, when } from '../components/format';
import { EventList, JsonView } from '../components/Events';
import { ConfirmButton } from '../components/Modal';
import { Card, PageHead } from '../components/Page';
import { ProblemBanner } from '../components/ProblemBanner';
import { Spinner } from '../components/Spinner';
import { StatusBadge } from '../components/Status';
import { Tabs } from '../components/Tabs';
import { useCan } from '../state/caller';
import { useLiveObject } from '../state/live';
import { Files } from './sandbox/Files';
import { Metrics } from './sandbox/Metrics';
import { Previews } from './sandbox/Previews';
import { Processes } from './sandbox/Processes';

const Terminal = lazy(() => import('./sandbox/Terminal'));

export default function SandboxPage({ params }: { params: { name: string; tab?: string } }) {
  const name = decodeURIComponent(params.name);
  const tab = params.tab ?? '';
  const [, navigate] = useLocation();
  const canWrite = useCan('member');
  const {
    obj: s,
    error,
    gone,
  } = useLiveObject('sandboxes', name, () => get(`/sandboxes/${encodeURIComponent(name)}`));
  const base = `/sandboxes/${encodeURIComponent(name)}`;
  // Using a sandbox's own API runs code in it: a viewer cannot (the gateway says so), so those tabs are not shown.
  const tabs: [string, string][] = canWrite
    ? [
        ['', 'Overview'],
        ['terminal', 'Terminal'],
        ['files', 'Files'],
        ['processes', 'Processes'],
        ['previews', 'Previews'],
        ['metrics', 'Metrics'],
      ]
    : [
        ['', 'Overview'],
        ['previews', 'Previews'],
        ['metrics', 'Metrics'],
      ];
  return (
    <div className="stack">
      <PageHead
        crumbs={[{ to: '/sandboxes', label: 'Sandboxes' }]}
        title={name}
        badge={
          s ? (
            <>
              <StatusBadge status={s.status} />
              <StatusBadge
                status={s.state}
                title="Run state: STANDBY is frozen, and wakes on the next request"
              />
            </>
          ) : null
        }
        sub={s?.metadata?.url ? <span className="mono">{s.metadata.url}</span> : undefined}
        actions={
          canWrite && s ? (
            <ConfirmButton
              label="Delete"
              title={`Delete sandbox ${name}?`}
              message="Its processes stop and its files go (volumes stay). This cannot be undone."
              onConfirm={async () => {
                await api('DELETE', `/sandboxes/${encodeURIComponent(name)}`);
                navigate('/sandboxes');
              }}
            />
          ) : null
        }
      />
      <ProblemBanner error={error} />
      {gone ? <div className="banner banner-info">This sandbox was deleted.</div> : null}
      <Tabs base={base} tabs={tabs} current={tab} />
      {!s ? (
        <Spinner />
      ) : tab === '' ? (
        <SandboxOverview s={s} />
      ) : tab === 'terminal' && canWrite ? (
        <Suspense fallback={<Spinner label="Loading the terminal" />}>
          <Terminal name={name} />
        </Suspense>
      ) : tab === 'files' && canWrite ? (
        <Files name={name} />
      ) : tab === 'processes' && canWrite ? (
        <Processes name={name} />
      ) : tab === 'previews' ? (
        <Previews name={name} />
      ) : tab === 'metrics' ? (
        <Metrics name={name} />
      ) : null}
    </div>
  );
}

function SandboxOverview({ s }: { s: any }) {
  const rt = s.spec?.runtime ?? {};
  return (
    <div className="grid grid-2">
      <Card title="Details">
        <dl className="kv">
          <dt>Status</dt>
          <dd>
            <StatusBadge status={s.status} />
          </dd>
          <dt>Run state</dt>
          <dd>
            <StatusBadge status={s.state} /> <span className="muted">last used {ago(s.lastUsedAt)}</span>
          </dd>
          <dt>Image</dt>
          <dd className="mono">{rt.image}</dd>
          <dt>Memory</dt>
          <dd>{bytes((rt.memory ?? 0) * 1024 * 1024)}</dd>
          <dt>Region</dt>
          <dd>{s.spec?.region ?? '—'}</dd>
          <dt>Time to live</dt>
          <dd>{rt.ttl ?? '—'}</dd>
          <dt>Created</dt>
          <dd>
            {when(s.metadata.createdAt)} <span className="muted">by {s.metadata.createdBy ?? '—'}</span>
          </dd>
          <dt>Address</dt>
          <dd className="mono">{s.metadata.url ?? '—'}</dd>
        </dl>
      </Card>
      <Card title="Events" flush>
        <EventList events={s.events} />
      </Card>
      <Card title="Spec">
        <JsonView value={s.spec} />
      </Card>
    </div>
  );
}
