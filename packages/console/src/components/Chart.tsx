// A time-series chart (uPlot: small and fast on canvas), sized to its box and coloured from the theme.
import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { cssVar } from '../state/theme';

export interface Series {
  label: string;
  /** One value per x (null: no value). */
  values: (number | null)[];
  /** Theme variable of its colour, e.g. --chart-1. */
  color?: string;
  bars?: boolean;
}

export function Chart({
  x,
  series,
  height = 220,
  yLabel,
  format,
  label,
}: {
  /** Unix seconds. */
  x: number[];
  series: Series[];
  height?: number;
  yLabel?: string;
  format?: (v: number) => string;
  label: string;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = series.map((s) => `${s.label}${s.bars ? 'b' : ''}`).join('|');

  // biome-ignore lint/correctness/useExhaustiveDependencies: rebuilt only when the series' shape changes
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const axis = {
      stroke: cssVar('--muted'),
      grid: { stroke: cssVar('--grid'), width: 1 },
      ticks: { show: false },
    };
    const fmt = format ?? ((v: number) => String(v));
    const opts: uPlot.Options = {
      width: el.clientWidth || 600,
      height,
      legend: { show: true },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true } },
      axes: [
        axis,
        {
          ...axis,
          size: 64,
          label: yLabel,
          values: (_u, vals) => vals.map((v) => (v === null ? '' : fmt(v))),
        },
      ],
      series: [
        {},
        ...series.map((s, i) => ({
          label: s.label,
          stroke: cssVar(s.color ?? `--chart-${(i % 4) + 1}`),
          fill: `${cssVar(s.color ?? `--chart-${(i % 4) + 1}`)}22`,
          width: 2,
          points: { show: false },
          value: (_u: uPlot, v: number | null) => (v === null ? '—' : fmt(v)),
          ...(s.bars ? { paths: uPlot.paths.bars!({ size: [0.6, 40] }) } : {}),
        })),
      ],
    };
    plot.current = new uPlot(opts, [x, ...series.map((s) => s.values)] as uPlot.AlignedData, el);
    const ro = new ResizeObserver(() => plot.current?.setSize({ width: el.clientWidth, height }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [shape, height]);

  useEffect(() => {
    plot.current?.setData([x, ...series.map((s) => s.values)] as uPlot.AlignedData);
  }, [x, series]);

  return <div className="chart" ref={box} role="img" aria-label={label} />;
}
