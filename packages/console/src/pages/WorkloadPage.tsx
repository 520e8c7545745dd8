// One agent or MCP server: status and events live, revisions with the canary share, the build log followed as it
// is written, replicas over time, the replicas' output, and a try-it panel.
import { useLocation } from 'wouter';
import { api, get } from '../api/client';
import { when } from '../components/format';
import { EventList, JsonView } from '../components/Events';
import { LogView, useFollowedText } from '../components/LogView';
import { ConfirmButton } from '../components/Modal';
import { Card, PageHead } from '../components/Page';
import { ProblemBanner } from '../components/ProblemBanner';
import { Spinner } from '../components/Spinner';
import { StatusBadge } from '../components/Status';
import { Tabs } from '../components/Tabs';
import { useCan } from '../state/caller';
import { useLiveObject } from '../state/live';
import { Replicas } from './workload/Replicas';
import { Revisions } from './workload/Revisions';
import { TryAgent } from './workload/TryAgent';
import { TryMcp } from './workload/TryMcp';
import { LABEL } from './Workloads';

type Kind = 'agents' | 'functions';

export default function WorkloadPage({
  kind,
  params,
}: {
  kind: Kind;
  params: { name: string; tab?: string };
}) {
  const name = decodeURIComponent(params.name);
  const tab = params.tab ?? '';
  const [, navigate] = useLocation();
  const canWrite = useCan('member');
  const path = `/${kind}/${encodeURIComponent(name)}`;
  const { obj: o, error, gone } = useLiveObject(kind, name, () => get(path));
  const tabs: [string, string][] = [
    ['', 'Overview'],
    ['revisions', 'Revisions'],
    ['build', 'Build log'],
    ['logs', 'Logs'],
    ...(canWrite ? ([['try', kind === 'agents' ? 'Try it' : 'Tools']] as [string, string][]) : []),
  ];
  return (
    <div className="stack">
      <PageHead
        crumbs={[{ to: `/${kind}`, label: LABEL[kind] }]}
        title={name}
        badge={o ? <StatusBadge status={o.status} /> : null}
        sub={o?.metadata?.url ? <span className="mono">{o.metadata.url}</span> : undefined}
        actions={
          canWrite && o ? (
            <ConfirmButton
              label="Delete"
              title={`Delete ${name}?`}
              message="Its replicas stop, its address stops answering and its revisions go."
              onConfirm={async () => {
                await api('DELETE', path);
                navigate(`/${kind}`);
              }}
            />
          ) : null
        }
      />
      <ProblemBanner error={error} />
      {gone ? <div className="banner banner-info">This object was deleted.</div> : null}
      <Tabs base={`/${kind}/${encodeURIComponent(name)}`} tabs={tabs} current={tab} />
      {!o ? (
        <Spinner />
      ) : tab === '' ? (
        <div className="grid grid-2">
          <Card title="Details">
            <dl className="kv">
              <dt>Status</dt>
              <dd>
                <StatusBadge status={o.status} />
              </dd>
              <dt>Active revision</dt>
              <dd className="mono">{o.activeRevision ?? '—'}</dd>
              <dt>Canary</dt>
              <dd className="mono">
                {o.canaryRevision && o.spec?.revision?.canaryPercent
                  ? `${o.canaryRevision} at ${o.spec.revision.canaryPercent}%`
                  : 'none'}
              </dd>
              <dt>Source</dt>
              <dd className="mono">{o.source?.digest?.slice(0, 19) ?? '—'}</dd>
              <dt>Uploaded</dt>
              <dd>{when(o.source?.uploadedAt)}</dd>
              <dt>Address</dt>
              <dd className="mono">{o.metadata.url ?? '—'}</dd>
            </dl>
          </Card>
          <Replicas kind={kind} name={name} />
          <Card title="Events" flush>
            <EventList events={o.events} />
          </Card>
          <Card title="Spec">
            <JsonView value={o.spec} />
          </Card>
        </div>
      ) : tab === 'revisions' ? (
        <Revisions kind={kind} name={name} obj={o} />
      ) : tab === 'build' ? (
        <BuildLog kind={kind} name={name} status={o.status} digest={o.source?.digest} />
      ) : tab === 'logs' ? (
        <ReplicaLogs kind={kind} name={name} />
      ) : tab === 'try' && kind === 'agents' ? (
        <TryAgent name={name} obj={o} />
      ) : tab === 'try' ? (
        <TryMcp name={name} />
      ) : null}
    </div>
  );
}

/** The build of the last uploaded source, followed while it is written (a new upload starts it again). */
function BuildLog({
  kind,
  name,
  status,
  digest,
}: {
  kind: Kind;
  name: string;
  status: string;
  digest?: string;
}) {
  const building = status === 'UPLOADING' || status === 'BUILDING';
  const log = useFollowedText(
    `/v0/${kind}/${encodeURIComponent(name)}/revisions/latest/logs?follow=true`,
    digest,
  );
  return (
    <Card
      title={
        <div className="row">
          <h2>Build log</h2>
          <StatusBadge status={status} />
          {building && !log.ended ? <span className="muted">following…</span> : null}
        </div>
      }
    >
      <LogView label="Build log" text={log.text} error={log.error} tall empty="No build log yet." />
    </Card>
  );
}

function ReplicaLogs({ kind, name }: { kind: Kind; name: string }) {
  const log = useFollowedText(`/v0/${kind}/${encodeURIComponent(name)}/logs?follow=true`);
  return (
    <Card title="Replicas' output">
      <LogView label="Replica output" text={log.text} error={log.error} tall />
    </Card>
  );
}
