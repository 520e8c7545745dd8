// Tabs that are links (each tab has its own address), with the ARIA roles of a tab list.
import { Link } from 'wouter';

export function Tabs({ base, tabs, current }: { base: string; tabs: [string, string][]; current: string }) {
  return (
    <div className="tabs" role="tablist">
      {tabs.map(([id, label]) => (
        <Link
          key={id}
          href={id ? `${base}/${id}` : base}
          role="tab"
          aria-selected={current === id}
          className="tab"
        >
          {label}
        </Link>
      ))}
    </div>
  );
}
