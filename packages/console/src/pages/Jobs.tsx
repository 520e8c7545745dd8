// Jobs, live.
import { ago } from '../components/format';
import { Card, Empty, PageHead } from '../components/Page';
import { ProblemBanner } from '../components/ProblemBanner';
import { Spinner } from '../components/Spinner';
import { StatusBadge } from '../components/Status';
import { type Column, VirtualTable } from '../components/VirtualTable';
import { useLiveList } from '../state/live';

const COLUMNS: Column<any>[] = [
  {
    label: 'Name',
    width: 'minmax(160px, 2fr)',
    render: (o) => <span className="name-cell">{o.metadata.name}</span>,
  },
  { label: 'Status', width: '130px', render: (o) => <StatusBadge status={o.status} /> },
  {
    label: 'Revision',
    width: '140px',
    render: (o) => <span className="mono">{o.activeRevision?.slice(0, 10) ?? '—'}</span>,
  },
  { label: 'Retries', width: '80px', render: (o) => o.spec?.runtime?.maxRetries ?? 0 },
  { label: 'Parallel', width: '80px', render: (o) => o.spec?.runtime?.maxConcurrentTasks ?? 1 },
  {
    label: 'Updated',
    width: '110px',
    render: (o) => <span className="muted">{ago(o.metadata.updatedAt)}</span>,
  },
];

export default function Jobs() {
  const list = useLiveList('jobs', '/jobs');
  return (
    <div className="stack">
      <PageHead
        title="Jobs"
        sub="Batch work built from code: executions of many tasks, retried as the job says."
      />
      <ProblemBanner error={list.error} />
      <Card flush>
        {list.loading && !list.items.length ? (
          <Spinner />
        ) : list.items.length ? (
          <VirtualTable
            label="Jobs"
            rows={list.items}
            columns={COLUMNS}
            keyOf={(o: any) => o.metadata.name}
            hrefOf={(o: any) => `/jobs/${encodeURIComponent(o.metadata.name)}`}
            hasMore={list.hasMore}
            loadMore={list.loadMore}
          />
        ) : (
          <Empty>No jobs yet.</Empty>
        )}
      </Card>
    </div>
  );
}
