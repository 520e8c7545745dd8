// Sandboxes, live: status and run state change in place as the watch reports them; a thousand rows stay quick
// (virtualised, read in pages with the API's cursors).
import { useState } from 'react';
import { useLocation } from 'wouter';
import { api } from '../api/client';
import { ago, bytes } from '../components/format';
import { Modal } from '../components/Modal';
import { Card, Empty, PageHead } from '../components/Page';
import { ProblemBanner } from '../components/ProblemBanner';
import { Spinner } from '../components/Spinner';
import { StatusBadge } from '../components/Status';
import { type Column, VirtualTable } from '../components/VirtualTable';
import { useCan } from '../state/caller';
import { useLiveList } from '../state/live';

const COLUMNS: Column<any>[] = [
  {
    label: 'Name',
    width: 'minmax(160px, 2fr)',
    render: (s) => <span className="name-cell">{s.metadata.name}</span>,
  },
  { label: 'Status', width: '130px', render: (s) => <StatusBadge status={s.status} /> },
  { label: 'State', width: '110px', render: (s) => <StatusBadge status={s.state} /> },
  {
    label: 'Image',
    width: 'minmax(140px, 1.5fr)',
    render: (s) => <span className="mono">{s.spec?.runtime?.image}</span>,
  },
  { label: 'Memory', width: '90px', render: (s) => bytes((s.spec?.runtime?.memory ?? 0) * 1024 * 1024) },
  { label: 'Last used', width: '110px', render: (s) => <span className="muted">{ago(s.lastUsedAt)}</span> },
  {
    label: 'Created',
    width: '110px',
    render: (s) => <span className="muted">{ago(s.metadata.createdAt)}</span>,
  },
];

export default function Sandboxes() {
  const list = useLiveList('sandboxes', '/sandboxes');
  const canWrite = useCan('member');
  const [creating, setCreating] = useState(false);
  const awake = list.items.filter((s: any) => s.state === 'RUNNING').length;
  return (
    <div className="stack">
      <PageHead
        title="Sandboxes"
        sub={`${list.items.length}${list.hasMore ? '+' : ''} sandboxes · ${awake} awake`}
        actions={
          canWrite ? (
            <button type="button" className="btn btn-primary" onClick={() => setCreating(true)}>
              New sandbox
            </button>
          ) : null
        }
      />
      <ProblemBanner error={list.error} />
      <Card flush>
        {list.loading && !list.items.length ? (
          <Spinner />
        ) : list.items.length ? (
          <VirtualTable
            label="Sandboxes"
            rows={list.items}
            columns={COLUMNS}
            keyOf={(s: any) => s.metadata.name}
            hrefOf={(s: any) => `/sandboxes/${encodeURIComponent(s.metadata.name)}`}
            hasMore={list.hasMore}
            loadMore={list.loadMore}
          />
        ) : (
          <Empty>No sandboxes yet.{canWrite ? ' Create one to get a shell in seconds.' : ''}</Empty>
        )}
      </Card>
      <CreateSandbox open={creating} onClose={() => setCreating(false)} />
    </div>
  );
}

function CreateSandbox({ open, onClose }: { open: boolean; onClose: () => void }) {
  const [, navigate] = useLocation();
  const [name, setName] = useState('');
  const [image, setImage] = useState('');
  const [memory, setMemory] = useState('1024');
  const [ttl, setTtl] = useState('');
  const [envs, setEnvs] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  async function create() {
    setBusy(true);
    setError(undefined);
    try {
      const env = envs
        .split('\n')
        .map((l) => l.trim())
        .filter(Boolean)
        .map((l) => {
          const i = l.indexOf('=');
          return { name: i < 0 ? l : l.slice(0, i), value: i < 0 ? '' : l.slice(i + 1) };
        });
      const runtime: Record<string, unknown> = { memory: Number(memory) };
      if (image.trim()) runtime.image = image.trim();
      if (ttl.trim()) runtime.ttl = ttl.trim();
      await api('POST', '/sandboxes', {
        body: {
          metadata: { name: name.trim() },
          spec: { runtime: { ...runtime, ...(env.length ? { envs: env } : {}) } },
        },
      });
      onClose();
      navigate(`/sandboxes/${encodeURIComponent(name.trim())}`);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }
  return (
    <Modal
      open={open}
      title="New sandbox"
      onClose={onClose}
      footer={
        <>
          <button type="button" className="btn" onClick={onClose}>
            Cancel
          </button>
          <button type="button" className="btn btn-primary" disabled={busy || !name.trim()} onClick={create}>
            {busy ? 'Starting…' : 'Create'}
          </button>
        </>
      }
    >
      <label className="field">
        <span>Name</span>
        <input value={name} onChange={(e) => setName(e.target.value)} placeholder="my-sandbox" required />
      </label>
      <div className="form-row">
        <label className="field">
          <span>Image</span>
          <input value={image} onChange={(e) => setImage(e.target.value)} placeholder="default image" />
        </label>
        <label className="field">
          <span>Memory (MB)</span>
          <input
            type="number"
            min={128}
            step={128}
            value={memory}
            onChange={(e) => setMemory(e.target.value)}
          />
        </label>
        <label className="field">
          <span>Time to live</span>
          <input value={ttl} onChange={(e) => setTtl(e.target.value)} placeholder="e.g. 24h" />
        </label>
      </div>
      <label className="field">
        <span>Environment (NAME=value per line)</span>
        <textarea value={envs} onChange={(e) => setEnvs(e.target.value)} rows={3} />
      </label>
      <ProblemBanner error={error} />
    </Modal>
  );
}
