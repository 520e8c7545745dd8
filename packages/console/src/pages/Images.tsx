// Images the workspace holds by name or its sandboxes run on: pull one by reference, let go of a name.
import { useState } from 'react';
import { api } from '../api/client';
import { ago, bytes } from '../components/format';
import { ConfirmButton } from '../components/Modal';
import { Card, Empty, PageHead } from '../components/Page';
import { ProblemBanner } from '../components/ProblemBanner';
import { Spinner } from '../components/Spinner';
import { useCan } from '../state/caller';
import { useAsync } from '../state/hooks';

export default function Images() {
  const list = useAsync((signal) => api<any[]>('GET', '/images', { signal }), []);
  const canWrite = useCan('member');
  const [ref, setRef] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  return (
    <div className="stack">
      <PageHead
        title="Images"
        sub="Root filesystems for sandboxes and workloads, pulled or imported into this workspace."
      />
      {canWrite ? (
        <Card title="Pull an image">
          <form
            className="row"
            onSubmit={async (e) => {
              e.preventDefault();
              setBusy(true);
              setError(undefined);
              try {
                await api('POST', '/images', { body: { reference: ref.trim() } });
                setRef('');
                list.reload();
              } catch (err) {
                setError(err);
              } finally {
                setBusy(false);
              }
            }}
          >
            <label className="field" style={{ flex: 1, minWidth: 240 }}>
              <span>Reference</span>
              <input
                className="mono"
                value={ref}
                onChange={(e) => setRef(e.target.value)}
                placeholder="python:3.12-slim"
              />
            </label>
            <button
              type="submit"
              className="btn btn-primary"
              disabled={busy || !ref.trim()}
              style={{ alignSelf: 'flex-end' }}
            >
              {busy ? 'Pulling…' : 'Pull'}
            </button>
          </form>
          <ProblemBanner error={error} />
        </Card>
      ) : null}
      <Card flush>
        <ProblemBanner error={list.error} />
        {list.loading && !list.data ? (
          <Spinner />
        ) : (list.data ?? []).length ? (
          <table className="table" aria-label="Images">
            <thead>
              <tr>
                <th>Names</th>
                <th>Digest</th>
                <th>Size</th>
                <th>In use</th>
                <th>Created</th>
                {canWrite ? <th /> : null}
              </tr>
            </thead>
            <tbody>
              {(list.data ?? []).map((i) => (
                <tr key={i.id}>
                  <td className="mono">
                    {i.references.join(', ') || <span className="muted">unnamed</span>}
                  </td>
                  <td className="mono muted">{i.digest.slice(0, 19)}</td>
                  <td>{bytes(i.size)}</td>
                  <td>
                    {i.inUse ? (
                      <span className="badge badge-ok">in use</span>
                    ) : (
                      <span className="muted">—</span>
                    )}
                  </td>
                  <td className="muted">{ago(i.createdAt)}</td>
                  {canWrite ? (
                    <td>
                      {i.references[0] ? (
                        <ConfirmButton
                          small
                          label="Release"
                          title={`Release ${i.references[0]}?`}
                          message="The workspace lets go of this name; the image goes once nothing runs on it."
                          onConfirm={async () => {
                            await api('DELETE', `/images/${encodeURIComponent(i.references[0])}`);
                            list.reload();
                          }}
                        />
                      ) : null}
                    </td>
                  ) : null}
                </tr>
              ))}
            </tbody>
          </table>
        ) : (
          <Empty>No images: sandboxes run on the default image.</Empty>
        )}
      </Card>
    </div>
  );
}
