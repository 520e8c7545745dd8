// Policies, and for token budgets (maxToken) each window's use and what is left (GET /v0/policies/{name}/usages).
import { useState } from 'react';
import { api } from '../api/client';
import { num, when } from '../components/format';
import { KindTable } from '../components/KindTable';
import { Card, Empty, PageHead } from '../components/Page';
import { ProblemBanner } from '../components/ProblemBanner';
import { useAsync, useInterval } from '../state/hooks';

export default function Policies() {
  const [picked, setPicked] = useState<any>(null);
  return (
    <div className="stack">
      <PageHead
        title="Policies"
        sub="Where workloads may run and which models they may call, and token budgets."
      />
      <KindTable
        plural="policies"
        path="/policies"
        label="Policies"
        onSelect={setPicked}
        columns={[
          { label: 'Type', render: (o) => <span className="badge plain badge-accent">{o.spec?.type}</span> },
          { label: 'Applies to', render: (o) => (o.spec?.resourceTypes ?? []).join(', ') || 'all' },
          {
            label: 'Rule',
            render: (o) =>
              o.spec?.type === 'maxToken'
                ? `${num(o.spec.maxTokens?.total ?? o.spec.maxTokens?.input ?? o.spec.maxTokens?.output)} tokens per ${o.spec.maxTokens?.step ?? 1} ${o.spec.maxTokens?.granularity}`
                : o.spec?.type === 'location'
                  ? (o.spec.locations ?? []).map((l: any) => l.name).join(', ')
                  : (o.spec?.flavors ?? []).map((f: any) => f.name).join(', '),
          },
        ]}
        empty="No policies."
      />
      {picked?.spec?.type === 'maxToken' ? <Budget name={picked.metadata.name} /> : null}
    </div>
  );
}

function Budget({ name }: { name: string }) {
  const u = useAsync(
    (signal) => api<any[]>('GET', `/policies/${encodeURIComponent(name)}/usages`, { signal }),
    [name],
  );
  useInterval(() => u.reload(), 5000);
  return (
    <Card title={`Budget of ${name}`}>
      <ProblemBanner error={u.error} />
      {(u.data ?? []).length ? (
        <div className="stack">
          {(u.data ?? []).map((w) => (
            <div key={`${w.start}`} className="stack">
              <div className="muted">
                Window {when(w.start)} – {when(w.end)}
              </div>
              {(['total', 'input', 'output'] as const)
                .filter((k) => w.limits?.[k] !== undefined)
                .map((k) => {
                  const used = w.used[k] + (w.reserved?.[k] ?? 0);
                  const pct = Math.min(100, (used / w.limits[k]) * 100);
                  return (
                    <div key={k}>
                      <div className="row">
                        <strong>{k}</strong>
                        <span className="muted">
                          {num(w.used[k])} used · {num(w.remaining?.[k])} left of {num(w.limits[k])}
                        </span>
                      </div>
                      <div className={`bar ${pct > 90 ? 'bad' : pct > 70 ? 'warn' : 'ok'}`}>
                        <span style={{ width: `${pct}%` }} />
                      </div>
                    </div>
                  );
                })}
            </div>
          ))}
        </div>
      ) : (
        <Empty>No tokens used in the current window.</Empty>
      )}
    </Card>
  );
}
