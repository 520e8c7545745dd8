// Volumes and drives: persistent storage mounted into sandboxes and workloads.
import { useState } from 'react';
import { api } from '../api/client';
import { ago } from '../components/format';
import { KindTable } from '../components/KindTable';
import { Card, PageHead } from '../components/Page';
import { ProblemBanner } from '../components/ProblemBanner';
import { StatusBadge } from '../components/Status';
import { useCan } from '../state/caller';

export default function Storage({ kind }: { kind: 'volumes' | 'drives' }) {
  const canWrite = useCan('member');
  const [name, setName] = useState('');
  const [size, setSize] = useState('1024');
  const [error, setError] = useState<unknown>();
  return (
    <div className="stack">
      <PageHead
        title={kind === 'volumes' ? 'Volumes' : 'Drives'}
        sub={
          kind === 'volumes'
            ? 'Storage that outlives a sandbox; attached to one holder at a time.'
            : 'Shared storage mounted by many sandboxes at once.'
        }
      />
      {canWrite ? (
        <Card title={kind === 'volumes' ? 'New volume' : 'New drive'}>
          <form
            className="row"
            onSubmit={async (e) => {
              e.preventDefault();
              setError(undefined);
              try {
                await api('POST', `/${kind}`, {
                  body: { metadata: { name: name.trim() }, spec: { size: Number(size) } },
                });
                setName('');
              } catch (err) {
                setError(err);
              }
            }}
          >
            <label className="field">
              <span>Name</span>
              <input value={name} onChange={(e) => setName(e.target.value)} required />
            </label>
            <label className="field">
              <span>Size (MB)</span>
              <input type="number" min={1} value={size} onChange={(e) => setSize(e.target.value)} />
            </label>
            <button
              type="submit"
              className="btn btn-primary"
              style={{ alignSelf: 'flex-end' }}
              disabled={!name.trim()}
            >
              Create
            </button>
          </form>
          <ProblemBanner error={error} />
        </Card>
      ) : null}
      <KindTable
        plural={kind}
        path={`/${kind}`}
        label={kind}
        columns={[
          { label: 'Status', render: (o) => <StatusBadge status={o.status} /> },
          { label: 'Size', render: (o) => (o.spec?.size ? `${o.spec.size} MB` : '—') },
          { label: 'Attached to', render: (o) => o.state?.attachedTo ?? o.attachedTo ?? '—' },
          { label: 'Created', render: (o) => <span className="muted">{ago(o.metadata.createdAt)}</span> },
        ]}
        empty={kind === 'volumes' ? 'No volumes.' : 'No drives.'}
      />
    </div>
  );
}
