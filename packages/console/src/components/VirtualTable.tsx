// A list that stays quick with thousands of rows: only the rows in view are in the DOM (TanStack Virtual). Each
// row is a link to its object, reached with Tab and opened with Enter; the column heads are read before the rows.
// Scrolling near the end asks for the next page.
import { useVirtualizer } from '@tanstack/react-virtual';
import { type ReactNode, useEffect, useRef } from 'react';
import { Link } from 'wouter';

export interface Column<T> {
  label: string;
  width: string;
  render: (row: T) => ReactNode;
}

const ROW_HEIGHT = 48;

export function VirtualTable<T>({
  rows,
  columns,
  hrefOf,
  keyOf,
  hasMore,
  loadMore,
  label,
}: {
  rows: T[];
  columns: Column<T>[];
  hrefOf: (row: T) => string;
  keyOf: (row: T) => string;
  hasMore?: boolean;
  loadMore?: () => void;
  label: string;
}) {
  const scroller = useRef<HTMLDivElement>(null);
  const v = useVirtualizer({
    count: rows.length,
    getScrollElement: () => scroller.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 12,
  });
  const template = columns.map((c) => c.width).join(' ');
  const items = v.getVirtualItems();
  const last = items.at(-1)?.index ?? 0;
  useEffect(() => {
    if (hasMore && loadMore && last >= rows.length - 20) loadMore();
  }, [last, rows.length, hasMore, loadMore]);
  return (
    <section className="vt" ref={scroller} aria-label={`${label} (${rows.length})`}>
      <div className="vt-head" style={{ gridTemplateColumns: template }}>
        {columns.map((c) => (
          <div key={c.label}>{c.label}</div>
        ))}
      </div>
      <div style={{ height: v.getTotalSize(), position: 'relative' }}>
        {items.map((it) => {
          const row = rows[it.index];
          return (
            <Link
              key={keyOf(row)}
              href={hrefOf(row)}
              className="vt-row"
              style={{
                gridTemplateColumns: template,
                height: ROW_HEIGHT,
                transform: `translateY(${it.start}px)`,
              }}
            >
              {columns.map((c) => (
                <div key={c.label}>{c.render(row)}</div>
              ))}
            </Link>
          );
        })}
      </div>
    </section>
  );
}
