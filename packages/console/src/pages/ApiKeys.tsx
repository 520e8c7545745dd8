// Service accounts of the workspace and their API keys (admins only, as the API says): create a key (shown once),
// revoke one.
import { useState } from 'react';
import { api } from '../api/client';
import { ago } from '../components/format';
import { ConfirmButton, Modal } from '../components/Modal';
import { Card, Empty, PageHead } from '../components/Page';
import { ProblemBanner } from '../components/ProblemBanner';
import { Spinner } from '../components/Spinner';
import { useCan } from '../state/caller';
import { useAsync } from '../state/hooks';

export default function ApiKeys() {
  const isAdmin = useCan('admin');
  const accounts = useAsync(
    (signal) => (isAdmin ? api<any[]>('GET', '/service_accounts', { signal }) : Promise.resolve([])),
    [isAdmin],
  );
  const [name, setName] = useState('');
  const [role, setRole] = useState('member');
  const [created, setCreated] = useState<{ id: string; secret: string } | null>(null);
  const [error, setError] = useState<unknown>();
  if (!isAdmin)
    return (
      <div className="stack">
        <PageHead title="API keys" />
        <div className="banner banner-info">
          Service accounts and their keys are managed by the workspace's admins.
        </div>
      </div>
    );
  return (
    <div className="stack">
      <PageHead
        title="API keys"
        sub="Service accounts act for programs; each has API keys, shown once when made."
      />
      <Card title="New service account">
        <form
          className="row"
          onSubmit={async (e) => {
            e.preventDefault();
            setError(undefined);
            try {
              const sa = await api('POST', '/service_accounts', { body: { name: name.trim(), role } });
              setCreated({ id: sa.client_id, secret: sa.client_secret });
              setName('');
              accounts.reload();
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
            <span>Role</span>
            <select value={role} onChange={(e) => setRole(e.target.value)}>
              <option value="viewer">viewer</option>
              <option value="member">member</option>
              <option value="admin">admin</option>
            </select>
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
        {created ? (
          <div className="stack" style={{ marginTop: 12 }}>
            <div className="banner banner-ok">
              Client secret of {created.id}: copy it now, it is shown once.
            </div>
            <div className="secret-once">{created.secret}</div>
          </div>
        ) : null}
      </Card>
      <ProblemBanner error={accounts.error} />
      {accounts.loading && !accounts.data ? (
        <Spinner />
      ) : (accounts.data ?? []).length ? (
        (accounts.data ?? []).map((sa) => <Account key={sa.client_id} sa={sa} onDeleted={accounts.reload} />)
      ) : (
        <Empty>No service accounts.</Empty>
      )}
    </div>
  );
}

function Account({ sa, onDeleted }: { sa: any; onDeleted: () => void }) {
  const path = `/service_accounts/${encodeURIComponent(sa.client_id)}`;
  const keys = useAsync((signal) => api<any[]>('GET', `${path}/api_keys`, { signal }), [path]);
  const [fresh, setFresh] = useState<string | null>(null);
  const [expires, setExpires] = useState('');
  const [error, setError] = useState<unknown>();
  return (
    <Card
      title={
        <div>
          <h2>{sa.name}</h2>
          <div className="mono muted">{sa.client_id}</div>
        </div>
      }
      actions={
        <>
          <form
            className="row"
            onSubmit={async (e) => {
              e.preventDefault();
              setError(undefined);
              try {
                const k = await api('POST', `${path}/api_keys`, {
                  body: expires.trim() ? { expires_in: expires.trim() } : {},
                });
                setFresh(k.apiKey);
                keys.reload();
              } catch (err) {
                setError(err);
              }
            }}
          >
            <label className="visually-hidden" htmlFor={`exp-${sa.client_id}`}>
              Expires in
            </label>
            <input
              id={`exp-${sa.client_id}`}
              value={expires}
              onChange={(e) => setExpires(e.target.value)}
              placeholder="expires in (e.g. 30d)"
              size={16}
            />
            <button type="submit" className="btn btn-sm btn-primary">
              New key
            </button>
          </form>
          <ConfirmButton
            small
            label="Delete account"
            title={`Delete service account ${sa.name}?`}
            message="Its keys stop working at once."
            onConfirm={async () => {
              await api('DELETE', path);
              onDeleted();
            }}
          />
        </>
      }
      flush
    >
      <ProblemBanner error={error ?? keys.error} />
      <Modal
        open={!!fresh}
        title="New API key"
        onClose={() => setFresh(null)}
        footer={
          <button type="button" className="btn btn-primary" onClick={() => setFresh(null)}>
            Done
          </button>
        }
      >
        <p>Copy the key now: it is shown once and cannot be read again.</p>
        <div className="secret-once">{fresh}</div>
      </Modal>
      {(keys.data ?? []).length ? (
        <table className="table">
          <thead>
            <tr>
              <th>Key</th>
              <th>Name</th>
              <th>Expires in</th>
              <th>Created</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {(keys.data ?? []).map((k) => (
              <tr key={k.id}>
                <td className="mono">{k.id}</td>
                <td>{k.name ?? '—'}</td>
                <td>{k.expires_in ?? 'never'}</td>
                <td className="muted">{ago(k.createdAt)}</td>
                <td>
                  <ConfirmButton
                    small
                    label="Revoke"
                    title="Revoke this key?"
                    message="Every client using it is refused at once."
                    onConfirm={async () => {
                      await api('DELETE', `${path}/api_keys/${encodeURIComponent(k.id)}`);
                      keys.reload();
                    }}
                  />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <Empty>No keys.</Empty>
      )}
    </Card>
  );
}
