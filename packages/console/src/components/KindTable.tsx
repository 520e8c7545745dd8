// A live table of a small kind (models, policies, connections, volumes, drives) with a delete per row for the roles
// that may delete; what the row shows is the caller's to say.
import type { ReactNode } from 'react';
import { api } from '../api/client';
import { type Role, useCan } from '../state/caller';
import { useLiveList } from '../state/live';
import { ConfirmButton } from './Modal';
import { Card, Empty } from './Page';
import { ProblemBanner } from './ProblemBanner';
import { Spinner } from './Spinner';

export interface KindColumn {
  label: string;
  render: (o: any) => ReactNode;
}

export function KindTable({
  plural,
  path,
  label,
  columns,
  deleteRole = 'member',
  empty = 'None yet.',
  onSelect,
}: {
  plural: string;
  path: string;
  label: string;
  columns: KindColumn[];
  deleteRole?: Role;
  empty?: string;
  onSelect?: (o: any) => void;
}) {
  const list = useLiveList(plural, path);
  const canDelete = useCan(deleteRole);
  return (
    <Card flush>
      <ProblemBanner error={list.error} />
      {list.loading && !list.items.length ? (
        <Spinner />
      ) : list.items.length ? (
        <div className="table-wrap">
          <table className="table" aria-label={label}>
            <thead>
              <tr>
                <th>Name</th>
                {columns.map((c) => (
                  <th key={c.label}>{c.label}</th>
                ))}
                {canDelete ? <th /> : null}
              </tr>
            </thead>
            <tbody>
              {list.items.map((o: any) => (
                <tr key={o.metadata.name}>
                  <td>
                    {onSelect ? (
                      <button
                        type="button"
                        className="btn btn-ghost btn-sm name-cell"
                        onClick={() => onSelect(o)}
                      >
                        {o.metadata.name}
                      </button>
                    ) : (
                      <span className="name-cell">{o.metadata.name}</span>
                    )}
                  </td>
                  {columns.map((c) => (
                    <td key={c.label}>{c.render(o)}</td>
                  ))}
                  {canDelete ? (
                    <td>
                      <ConfirmButton
                        small
                        label="Delete"
                        title={`Delete ${o.metadata.name}?`}
                        message="This cannot be undone."
                        onConfirm={() => api('DELETE', `${path}/${encodeURIComponent(o.metadata.name)}`)}
                      />
                    </td>
                  ) : null}
                </tr>
              ))}
            </tbody>
          </table>
          {list.hasMore ? (
            <div className="table-foot">
              <span>More on the next page</span>
              <button type="button" className="btn btn-sm" onClick={list.loadMore}>
                Load more
              </button>
            </div>
          ) : null}
        </div>
      ) : (
        <Empty>{empty}</Empty>
      )}
    </Card>
  );
}
