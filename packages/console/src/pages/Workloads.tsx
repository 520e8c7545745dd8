// Agents or MCP servers (functions), live.
import { ago } from '../components/format';
import { Card, Empty, PageHead } from '../components/Page';
import { ProblemBanner } from '../components/ProblemBanner';
import { Spinner } from '../components/Spinner';
import { StatusBadge } from '../components/Status';
import { type Column, VirtualTable } from '../components/VirtualTable';
import { useLiveList } from '../state/live';

export const LABEL = { agents: 'Agents', functions: 'MCP servers' } as const;

export default function Workloads({ kind }: { kind: 'agents' | 'functions' }) {
  const list = useLiveList(kind, `/${kind}`);
  const columns: Column<any>[] = [
    {
      label: 'Name',
      width: 'minmax(160px, 2fr)',
      render: (o) => <span className="name-cell">{o.metadata.name}</span>,
    },
    { label: 'Status', width: '130px', render: (o) => <StatusBadge status={o.status} /> },
    {
      label: 'Revision',
      width: '150px',
      render: (o) => (
        <span className="mono">
          {o.activeRevision?.slice(0, 10) ?? '—'}
          {o.canaryRevision && o.spec?.revision?.canaryPercent ? ` +${o.spec.revision.canaryPercent}%` : ''}
        </span>
      ),
    },
    { label: 'Access', width: '90px', render: (o) => o.spec?.authenticationType ?? 'private' },
    {
      label: 'Address',
      width: 'minmax(160px, 2fr)',
      render: (o) => <span className="mono muted">{o.metadata.url}</span>,
    },
    {
      label: 'Updated',
      width: '110px',
      render: (o) => <span className="muted">{ago(o.metadata.updatedAt)}</span>,
    },
  ];
  return (
    <div className="stack">
      <PageHead
        title={LABEL[kind]}
        sub={
          kind === 'agents'
            ? 'Agents built from code: deploy with `berth deploy` or PUT /v0/agents/{name}/code.'
            : 'MCP servers built from code: each serves its tools at its /mcp address.'
        }
      />
      <ProblemBanner error={list.error} />
      <Card flush>
        {list.loading && !list.items.length ? (
          <Spinner />
        ) : list.items.length ? (
          <VirtualTable
            label={LABEL[kind]}
            rows={list.items}
            columns={columns}
            keyOf={(o: any) => o.metadata.name}
            hrefOf={(o: any) => `/${kind}/${encodeURIComponent(o.metadata.name)}`}
            hasMore={list.hasMore}
            loadMore={list.loadMore}
          />
        ) : (
          <Empty>Nothing deployed yet.</Empty>
        )}
      </Card>
    </div>
  );
}
