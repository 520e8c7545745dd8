// Memory and CPU of the sandbox over time, from its series in /metrics (read every few seconds while the page is
// open; the history is kept by this page, from when it opened).
import { useRef, useState } from 'react';
import { scrape } from '../../api/metrics';
import { getSession } from '../../api/session';
import { Chart } from '../../components/Chart';
import { bytes } from '../../components/format';
import { Card } from '../../components/Page';
import { ProblemBanner } from '../../components/ProblemBanner';
import { useInterval } from '../../state/hooks';

const EVERY_MS = 3000;
const KEEP = 200;

interface Point {
  t: number;
  mem: number | null;
  cpu: number | null;
  state: string;
}

export function Metrics({ name }: { name: string }) {
  const [points, setPoints] = useState<Point[]>([]);
  const [error, setError] = useState<unknown>();
  const lastCpu = useRef<{ t: number; v: number } | null>(null);
  useInterval(() => {
    const ws = getSession()?.workspace;
    scrape('berth_sandbox_').then(
      (samples) => {
        setError(undefined);
        const mine = samples.filter((s) => s.labels.workspace === ws && s.labels.sandbox === name);
        const t = Date.now() / 1000;
        const mem = mine.find((s) => s.name === 'berth_sandbox_memory_bytes')?.value ?? null;
        const cpuTotal = mine.find((s) => s.name === 'berth_sandbox_cpu_seconds_total')?.value;
        const state =
          mine.find((s) => s.name === 'berth_sandbox_state' && s.value === 1)?.labels.state ?? 'not running';
        let cpu: number | null = null;
        if (cpuTotal !== undefined) {
          const prev = lastCpu.current;
          if (prev && t > prev.t) cpu = Math.max(0, ((cpuTotal - prev.v) / (t - prev.t)) * 100);
          lastCpu.current = { t, v: cpuTotal };
        }
        setPoints((p) => [...p.slice(-KEEP + 1), { t, mem, cpu, state }]);
      },
      (err) => setError(err),
    );
  }, EVERY_MS);
  const x = points.map((p) => p.t);
  const last = points.at(-1);
  return (
    <div className="stack">
      <ProblemBanner error={error} />
      <div className="grid grid-4">
        <div className="card stat">
          <div className="stat-label">Memory</div>
          <div className="stat-value">{bytes(last?.mem ?? undefined)}</div>
        </div>
        <div className="card stat">
          <div className="stat-label">CPU</div>
          <div className="stat-value">{last?.cpu == null ? '—' : `${last.cpu.toFixed(1)}%`}</div>
        </div>
        <div className="card stat">
          <div className="stat-label">Run state</div>
          <div className="stat-value">{last?.state ?? '…'}</div>
        </div>
      </div>
      <div className="grid grid-2">
        <Card title="Memory">
          <Chart
            label="Memory over time"
            x={x}
            series={[{ label: 'memory', values: points.map((p) => p.mem) }]}
            format={(v) => bytes(v)}
          />
        </Card>
        <Card title="CPU">
          <Chart
            label="CPU over time"
            x={x}
            series={[{ label: 'cpu %', values: points.map((p) => p.cpu), color: '--chart-2' }]}
            format={(v) => `${v < 10 ? v.toFixed(1) : v.toFixed(0)}%`}
          />
        </Card>
      </div>
      <p className="muted">Sampled every {EVERY_MS / 1000} s from /metrics while this page is open.</p>
    </div>
  );
}
