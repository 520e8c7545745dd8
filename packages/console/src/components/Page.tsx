// A page's head (breadcrumbs, title, actions) and a card.
import type { ReactNode } from 'react';
import { Link } from 'wouter';

export function PageHead({
  title,
  sub,
  crumbs,
  badge,
  actions,
}: {
  title: ReactNode;
  sub?: ReactNode;
  crumbs?: { to: string; label: string }[];
  badge?: ReactNode;
  actions?: ReactNode;
}) {
  return (
    <div className="page-head">
      <div>
        {crumbs?.length ? (
          <nav className="crumbs" aria-label="Breadcrumb">
            {crumbs.map((c, i) => (
              <span key={c.to}>
                {i ? ' / ' : ''}
                <Link href={c.to}>{c.label}</Link>
              </span>
            ))}
          </nav>
        ) : null}
        <div className="title-row">
          <h1>{title}</h1>
          {badge}
        </div>
        {sub ? <p>{sub}</p> : null}
      </div>
      {actions ? <div className="actions">{actions}</div> : null}
    </div>
  );
}

export function Card({
  title,
  actions,
  children,
  flush,
  className,
}: {
  title?: ReactNode;
  actions?: ReactNode;
  children: ReactNode;
  flush?: boolean;
  className?: string;
}) {
  return (
    <section className={`card${className ? ` ${className}` : ''}`}>
      {title || actions ? (
        <div className="card-head">
          {typeof title === 'string' ? <h2>{title}</h2> : title}
          {actions ? <div className="actions">{actions}</div> : null}
        </div>
      ) : null}
      <div className={`card-body${flush ? ' flush' : ''}`}>{children}</div>
    </section>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <div className="empty">{children}</div>;
}
