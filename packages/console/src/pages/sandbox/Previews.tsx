// Previews of a sandbox: a port published at an address of its own, public or behind tokens. Their content is
// never shown inside the console (links open a new tab with no opener), so a page in a sandbox cannot reach it.
import { useState } from 'react';
import { api } from '../../api/client';
import { ago, when } from '../../components/format';
import { ConfirmButton, Modal } from '../../components/Modal';
import { Card, Empty } from '../../components/Page';
import { ProblemBanner } from '../../components/ProblemBanner';
import { StatusBadge } from '../../components/Status';
import { useCan } from '../../state/caller';
import { useAsync } from '../../state/hooks';
import { useLiveList } from '../../state/live';

export function Previews({ name }: { name: string }) {
  const base = `/sandboxes/${encodeURIComponent(name)}/previews`;
  const list = useLiveList('previews', base, { parent: name });
  const canWrite = useCan('member');
  const [port, setPort] = useState('3000');
  const [pub, setPub] = useState(false);
  const [pname, setPname] = useState('');
  const [error, setError] = useState<unknown>();
  async function create() {
    setError(undefined);
    try {
      await api('POST', base, {
        body: {
          metadata: { name: pname.trim() || `port-${port}` },
          spec: { port: Number(port), public: pub },
        },
      });
      setPname('');
    } catch (err) {
      setError(err);
    }
  }
  return (
    <div className="stack">
      {canWrite ? (
        <Card title="Publish a port">
          <form
            className="row"
            onSubmit={(e) => {
              e.preventDefault();
              void create();
            }}
          >
            <label className="field">
              <span>Port</span>
              <input
                type="number"
                min={1}
                max={65535}
                value={port}
                onChange={(e) => setPort(e.target.value)}
              />
            </label>
            <label className="field">
              <span>Name</span>
              <input value={pname} onChange={(e) => setPname(e.target.value)} placeholder={`port-${port}`} />
            </label>
            <label className="check" style={{ alignSelf: 'flex-end', height: 34 }}>
              <input type="checkbox" checked={pub} onChange={(e) => setPub(e.target.checked)} /> Public (no
              token)
            </label>
            <button type="submit" className="btn btn-primary" style={{ alignSelf: 'flex-end' }}>
              Create preview
            </button>
          </form>
          <ProblemBanner error={error} />
        </Card>
      ) : null}
      <Card title="Previews" flush>
        <ProblemBanner error={list.error} />
        {list.items.length ? (
          <table className="table" aria-label="Previews">
            <thead>
              <tr>
                <th>Name</th>
                <th>Port</th>
                <th>Access</th>
                <th>Address</th>
                <th>Status</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {list.items.map((p: any) => (
                <PreviewRow key={p.metadata.name} sandbox={name} p={p} canWrite={canWrite} />
              ))}
            </tbody>
          </table>
        ) : (
          <Empty>No previews.</Empty>
        )}
      </Card>
    </div>
  );
}

function PreviewRow({ sandbox, p, canWrite }: { sandbox: string; p: any; canWrite: boolean }) {
  const [tokens, setTokens] = useState(false);
  const path = `/sandboxes/${encodeURIComponent(sandbox)}/previews/${encodeURIComponent(p.metadata.name)}`;
  return (
    <tr>
      <td className="name-cell">{p.metadata.name}</td>
      <td>{p.spec.port}</td>
      <td>
        <span className={`badge plain ${p.spec.public ? 'badge-warn' : 'badge-accent'}`}>
          {p.spec.public ? 'public' : 'token'}
        </span>
      </td>
      <td>
        {p.metadata.url ? (
          <a href={p.metadata.url} target="_blank" rel="noopener noreferrer" className="mono">
            {p.metadata.url} ↗
          </a>
        ) : (
          '—'
        )}
      </td>
      <td>
        <StatusBadge status={p.status} />
      </td>
      <td>
        <div className="actions">
          {!p.spec.public ? (
            <button type="button" className="btn btn-sm" onClick={() => setTokens(true)}>
              Tokens
            </button>
          ) : null}
          {canWrite ? (
            <ConfirmButton
              small
              label="Delete"
              title={`Delete preview ${p.metadata.name}?`}
              message="Its address stops answering."
              onConfirm={() => api('DELETE', path)}
            />
          ) : null}
        </div>
        {tokens ? <Tokens path={path} canWrite={canWrite} onClose={() => setTokens(false)} /> : null}
      </td>
    </tr>
  );
}

function Tokens({ path, canWrite, onClose }: { path: string; canWrite: boolean; onClose: () => void }) {
  const list = useAsync((signal) => api<any[]>('GET', `${path}/tokens`, { signal }), [path]);
  const [fresh, setFresh] = useState<string>();
  const [hours, setHours] = useState('24');
  const [error, setError] = useState<unknown>();
  return (
    <Modal
      open
      title="Preview tokens"
      onClose={onClose}
      footer={
        <button type="button" className="btn" onClick={onClose}>
          Close
        </button>
      }
    >
      {fresh ? (
        <div className="stack">
          <div className="banner banner-ok">Token created: copy it now, it is shown once.</div>
          <div className="secret-once">{fresh}</div>
        </div>
      ) : null}
      <ProblemBanner error={error ?? list.error} />
      {(list.data ?? []).length ? (
        <table className="table">
          <tbody>
            {(list.data ?? []).map((t) => (
              <tr key={t.metadata?.name}>
                <td className="mono">{t.metadata?.name}</td>
                <td className="muted" title={when(t.spec?.expiresAt)}>
                  {t.spec?.expired ? 'expired' : `expires ${when(t.spec?.expiresAt)}`}
                </td>
                <td>{ago(t.metadata?.createdAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <Empty>No tokens.</Empty>
      )}
      {canWrite ? (
        <form
          className="row"
          onSubmit={async (e) => {
            e.preventDefault();
            setError(undefined);
            try {
              const expiresAt = new Date(Date.now() + Number(hours) * 3600_000).toISOString();
              const t = await api('POST', `${path}/tokens`, { body: { spec: { expiresAt } } });
              setFresh(t.spec?.token);
              list.reload();
            } catch (err) {
              setError(err);
            }
          }}
        >
          <label className="field">
            <span>Valid for (hours)</span>
            <input type="number" min={1} value={hours} onChange={(e) => setHours(e.target.value)} />
          </label>
          <button type="submit" className="btn btn-primary" style={{ alignSelf: 'flex-end' }}>
            New token
          </button>
        </form>
      ) : null}
    </Modal>
  );
}
