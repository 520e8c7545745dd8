// Replicas serving the object, counted over time (read every few seconds while the page is open).
import { useState } from 'react';
import { get } from '../../api/client';
import { Chart } from '../../components/Chart';
import { Card } from '../../components/Page';
import { useInterval } from '../../state/hooks';

const EVERY_MS = 4000;

export function Replicas({ kind, name }: { kind: string; name: string }) {
  const [points, setPoints] = useState<{ t: number; active: number; canary: number }[]>([]);
  useInterval(() => {
    get<any[]>(`/${kind}/${encodeURIComponent(name)}/replicas`).then(
      (list) =>
        setPoints((p) => [
          ...p.slice(-149),
          {
            t: Date.now() / 1000,
            active: list.filter((r) => r.role === 'active').length,
            canary: list.filter((r) => r.role === 'canary').length,
          },
        ]),
      () => undefined,
    );
  }, EVERY_MS);
  const last = points.at(-1);
  return (
    <Card
      title="Replicas"
      actions={<span className="muted">{last ? `${last.active + last.canary} now` : '…'}</span>}
    >
      <Chart
        label="Replica count over time"
        height={180}
        x={points.map((p) => p.t)}
        series={[
          { label: 'active', values: points.map((p) => p.active) },
          { label: 'canary', values: points.map((p) => p.canary), color: '--chart-2' },
        ]}
        format={(v) => String(Math.round(v))}
      />
    </Card>
  );
}
