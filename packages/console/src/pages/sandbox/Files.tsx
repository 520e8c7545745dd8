// The sandbox's files through its own API (GET/PUT/DELETE /filesystem/{path}): browse, read, upload, download, delete.
import { useRef, useState } from 'react';
import { sandboxApi, send, sandboxPath } from '../../api/client';
import { bytes, ago } from '../../components/format';
import { ConfirmButton } from '../../components/Modal';
import { Card, Empty } from '../../components/Page';
import { ProblemBanner } from '../../components/ProblemBanner';
import { Spinner } from '../../components/Spinner';
import { useAsync } from '../../state/hooks';

const fsPath = (p: string) => `/filesystem/${encodeURIComponent(p)}`;
const join = (dir: string, n: string) => (dir.endsWith('/') ? `${dir}${n}` : `${dir}/${n}`);
const parentOf = (p: string) => p.replace(/\/[^/]+\/?$/, '') || '/';

export function Files({ name }: { name: string }) {
  const [dir, setDir] = useState('/tmp');
  const [typed, setTyped] = useState('/tmp');
  const [open, setOpen] = useState<{ path: string; content: string } | null>(null);
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState('');
  const upload = useRef<HTMLInputElement>(null);
  const listing = useAsync((signal) => sandboxApi(name, 'GET', fsPath(dir), { signal }), [name, dir]);

  const go = (p: string) => {
    setDir(p);
    setTyped(p);
    setOpen(null);
  };
  async function read(path: string) {
    setError(undefined);
    try {
      const f = await sandboxApi(name, 'GET', fsPath(path));
      setOpen({ path, content: f.content });
    } catch (err) {
      setError(err);
    }
  }
  async function download(path: string) {
    setError(undefined);
    try {
      const res = await send('GET', sandboxPath(name, fsPath(path)), { query: { download: 'true' } });
      const url = URL.createObjectURL(await res.blob());
      const a = document.createElement('a');
      a.href = url;
      a.download = path.split('/').pop() || 'download';
      a.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (err) {
      setError(err);
    }
  }
  async function uploadFiles(files: FileList | null) {
    if (!files?.length) return;
    setError(undefined);
    try {
      for (const f of Array.from(files)) {
        setBusy(`Uploading ${f.name}`);
        const form = new FormData();
        form.append('file', f, f.name);
        await send('PUT', sandboxPath(name, fsPath(join(dir, f.name))), { raw: form });
      }
      listing.reload();
    } catch (err) {
      setError(err);
    } finally {
      setBusy('');
      if (upload.current) upload.current.value = '';
    }
  }

  const d = listing.data;
  return (
    <div className="stack">
      <Card
        title={
          <form
            className="row"
            onSubmit={(e) => {
              e.preventDefault();
              go(typed.trim() || '/');
            }}
          >
            <button
              type="button"
              className="btn btn-sm"
              onClick={() => go(parentOf(dir))}
              aria-label="Parent folder"
            >
              ↑
            </button>
            <label className="visually-hidden" htmlFor="fs-path">
              Path
            </label>
            <input id="fs-path" className="mono" value={typed} onChange={(e) => setTyped(e.target.value)} />
            <button type="submit" className="btn btn-sm">
              Go
            </button>
          </form>
        }
        actions={
          <>
            <input
              ref={upload}
              type="file"
              multiple
              className="visually-hidden"
              id="fs-upload"
              onChange={(e) => void uploadFiles(e.target.files)}
            />
            <label htmlFor="fs-upload" className="btn btn-sm btn-primary">
              Upload
            </label>
            <button type="button" className="btn btn-sm" onClick={listing.reload}>
              Refresh
            </button>
          </>
        }
        flush
      >
        {busy ? <div className="banner banner-info">{busy}…</div> : null}
        <ProblemBanner error={error ?? listing.error} />
        {listing.loading && !d ? (
          <Spinner />
        ) : d && (d.subdirectories?.length || d.files?.length) ? (
          <div className="table-wrap">
            <table className="table" aria-label="Files">
              <thead>
                <tr>
                  <th>Name</th>
                  <th>Size</th>
                  <th>Permissions</th>
                  <th>Modified</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {(d.subdirectories ?? []).map((s: any) => (
                  <tr key={`d${s.path}`}>
                    <td>
                      <button
                        type="button"
                        className="btn btn-ghost btn-sm file-row"
                        onClick={() => go(s.path)}
                      >
                        <span className="file-icon">📁</span>
                        {s.name}/
                      </button>
                    </td>
                    <td className="muted">—</td>
                    <td />
                    <td />
                    <td />
                  </tr>
                ))}
                {(d.files ?? []).map((f: any) => (
                  <tr key={`f${f.path}`}>
                    <td>
                      <button
                        type="button"
                        className="btn btn-ghost btn-sm file-row"
                        onClick={() => read(f.path)}
                      >
                        <span className="file-icon">📄</span>
                        {f.name}
                      </button>
                    </td>
                    <td>{bytes(f.size)}</td>
                    <td className="mono">{f.permissions}</td>
                    <td className="muted">{ago(f.lastModified)}</td>
                    <td>
                      <div className="actions">
                        <button type="button" className="btn btn-sm" onClick={() => download(f.path)}>
                          Download
                        </button>
                        <ConfirmButton
                          small
                          label="Delete"
                          title={`Delete ${f.name}?`}
                          message={<span className="mono">{f.path}</span>}
                          onConfirm={async () => {
                            await send('DELETE', sandboxPath(name, fsPath(f.path)));
                            if (open?.path === f.path) setOpen(null);
                            listing.reload();
                          }}
                        />
                      </div>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : (
          <Empty>This folder is empty.</Empty>
        )}
      </Card>
      {open ? (
        <Card
          title={<span className="mono">{open.path}</span>}
          actions={
            <button type="button" className="btn btn-sm" onClick={() => setOpen(null)}>
              Close
            </button>
          }
        >
          <pre className="log tall" data-label="File content">
            {open.content}
          </pre>
        </Card>
      ) : null}
    </div>
  );
}
