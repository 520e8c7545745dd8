// Model endpoints and their token usage: per hour as a chart, per API key as a table (GET /v0/models/{name}/usage).
import { Link, useLocation } from 'wouter';
import { api } from '../api/client';
import { Chart } from '../components/Chart';
import { duration, num } from '../components/format';
import { KindTable } from '../components/KindTable';
import { Card, Empty, PageHead } from '../components/Page';
import { ProblemBanner } from '../components/ProblemBanner';
import { StatusBadge } from '../components/Status';
import { useAsync, useInterval } from '../state/hooks';

export default function Models({ params }: { params: { name?: string } }) {
  const [, navigate] = useLocation();
  const name = params.name ? decodeURIComponent(params.name) : undefined;
  return (
    <div className="stack">
      <PageHead
        crumbs={name ? [{ to: '/models', label: 'Models' }] : undefined}
        title={name ?? 'Models'}
        sub={
          name ? 'Token usage of this endpoint over the last 24 hours.' : 'Model endpoints and what they use.'
        }
      />
      {name ? (
        <Usage name={name} />
      ) : (
        <KindTable
          plural="models"
          path="/models"
          label="Models"
          onSelect={(o) => navigate(`/models/${encodeURIComponent(o.metadata.name)}`)}
          columns={[
            { label: 'Status', render: (o) => <StatusBadge status={o.status} /> },
            { label: 'Provider', render: (o) => o.spec?.runtime?.type ?? '—' },
            { label: 'Model', render: (o) => <span className="mono">{o.spec?.runtime?.model ?? '—'}</span> },
            { label: 'Policies', render: (o) => (o.spec?.policies ?? []).join(', ') || '—' },
            { label: 'Address', render: (o) => <span className="mono muted">{o.metadata.url}</span> },
          ]}
          empty="No model endpoints yet."
        />
      )}
    </div>
  );
}

/** The last 24 hours, one bucket per hour (zero where nothing was called), so the chart spans a day. */
function lastHours(rows: any[]) {
  const byHour = new Map(rows.map((r) => [Math.floor(Date.parse(r.hour) / 3600_000), r]));
  const now = Math.floor(Date.now() / 3600_000);
  return Array.from({ length: 24 }, (_, i) => {
    const hour = now - 23 + i;
    const r = byHour.get(hour);
    return { t: hour * 3600, input: r?.inputTokens ?? 0, output: r?.outputTokens ?? 0 };
  });
}

function Usage({ name }: { name: string }) {
  const path = `/models/${encodeURIComponent(name)}/usage`;
  const hours = useAsync(
    (signal) => api<any[]>('GET', path, { query: { groupBy: 'hour', from: '24h' }, signal }),
    [path],
  );
  const keys = useAsync(
    (signal) => api<any[]>('GET', path, { query: { groupBy: 'key', from: '24h' }, signal }),
    [path],
  );
  const model = useAsync((signal) => api('GET', `/models/${encodeURIComponent(name)}`, { signal }), [name]);
  useInterval(() => {
    hours.reload();
    keys.reload();
  }, 10_000);
  const h = hours.data ?? [];
  const buckets = lastHours(h);
  const total = h.reduce(
    (a, r) => ({
      in: a.in + r.inputTokens,
      out: a.out + r.outputTokens,
      req: a.req + r.requests,
      err: a.err + r.errors,
    }),
    { in: 0, out: 0, req: 0, err: 0 },
  );
  const policies: string[] = model.data?.spec?.policies ?? [];
  return (
    <div className="stack">
      <ProblemBanner error={hours.error ?? keys.error} />
      <div className="grid grid-4">
        <div className="card stat">
          <div className="stat-label">Input tokens (24 h)</div>
          <div className="stat-value">{num(total.in)}</div>
        </div>
        <div className="card stat">
          <div className="stat-label">Output tokens (24 h)</div>
          <div className="stat-value">{num(total.out)}</div>
        </div>
        <div className="card stat">
          <div className="stat-label">Requests</div>
          <div className="stat-value">{num(total.req)}</div>
          <div className="stat-sub">{total.err} errors</div>
        </div>
      </div>
      <Card title="Tokens per hour">
        {h.length ? (
          <Chart
            label="Token usage per hour"
            x={buckets.map((b) => b.t)}
            series={[
              { label: 'input', values: buckets.map((b) => b.input), bars: true },
              { label: 'output', values: buckets.map((b) => b.output), color: '--chart-2', bars: true },
            ]}
            format={(v) => num(Math.round(v))}
          />
        ) : (
          <Empty>No calls in the last 24 hours.</Empty>
        )}
      </Card>
      <div className="grid grid-2">
        <Card title="By API key" flush>
          {(keys.data ?? []).length ? (
            <table className="table">
              <thead>
                <tr>
                  <th>Key</th>
                  <th>Requests</th>
                  <th>Tokens</th>
                  <th>Avg latency</th>
                </tr>
              </thead>
              <tbody>
                {(keys.data ?? []).map((r) => (
                  <tr key={r.keyId}>
                    <td className="mono">{r.keyId}</td>
                    <td>{num(r.requests)}</td>
                    <td>{num(r.totalTokens)}</td>
                    <td>{duration(r.avgLatencyMs)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : (
            <Empty>No calls yet.</Empty>
          )}
        </Card>
        <Card title="Policies">
          {policies.length ? (
            <ul>
              {policies.map((p) => (
                <li key={p}>
                  <Link href="/policies">{p}</Link>
                </li>
              ))}
            </ul>
          ) : (
            <Empty>No policy limits this endpoint.</Empty>
          )}
        </Card>
      </div>
    </div>
  );
}
