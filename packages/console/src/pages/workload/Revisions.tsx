// Built revisions, and the traffic between the active one and a canary: the slider sets spec.revision (PUT of the
// object as read, with the new revision block), and the split shown is the one the object then reports.
import { useEffect, useState } from 'react';
import { api } from '../../api/client';
import { ago, when } from '../../components/format';
import { Card, Empty } from '../../components/Page';
import { ProblemBanner } from '../../components/ProblemBanner';
import { useCan } from '../../state/caller';
import { useAsync } from '../../state/hooks';

export function Revisions({ kind, name, obj }: { kind: string; name: string; obj: any }) {
  const path = `/${kind}/${encodeURIComponent(name)}`;
  const revs = useAsync(
    (signal) => api<any[]>('GET', `${path}/revisions`, { signal }),
    [path, obj.activeRevision, obj.revisions?.length],
  );
  const canWrite = useCan('member');
  const list = revs.data ?? [];
  const active = obj.activeRevision as string | undefined;
  const others = list.filter((r) => r.id !== active);
  const current = obj.spec?.revision ?? {};
  const [canary, setCanary] = useState<string>(current.canary ?? others[0]?.id ?? '');
  const [percent, setPercent] = useState<number>(current.canaryPercent ?? 0);
  const [error, setError] = useState<unknown>();
  const [saving, setSaving] = useState(false);
  useEffect(() => {
    if (!canary && others[0]) setCanary(others[0].id);
  }, [canary, others]);

  async function apply(next: { active?: string; canary?: string; canaryPercent: number }) {
    setSaving(true);
    setError(undefined);
    try {
      const cur = await api('GET', path);
      const revision = { ...(cur.spec?.revision ?? {}), ...next };
      if (!revision.canaryPercent) delete revision.canary;
      await api('PUT', path, { body: { metadata: { name }, spec: { ...cur.spec, revision } } });
    } catch (err) {
      setError(err);
    } finally {
      setSaving(false);
    }
  }

  const shown = obj.canaryRevision ? (obj.spec?.revision?.canaryPercent ?? 0) : 0;
  return (
    <div className="stack">
      <Card title="Traffic">
        <div className="stack">
          <div className="bar" role="img" aria-label={`active ${100 - shown}%, canary ${shown}%`}>
            <span style={{ width: `${100 - shown}%` }} />
            <span style={{ width: `${shown}%` }} />
          </div>
          <div className="legend" data-testid="traffic-split">
            <span>
              <i className="swatch" />
              active <span className="mono">{active?.slice(0, 12) ?? '—'}</span>: {100 - shown}%
            </span>
            <span>
              <i className="swatch c2" />
              canary <span className="mono">{obj.canaryRevision?.slice(0, 12) ?? '—'}</span>: {shown}%
            </span>
          </div>
          {canWrite && others.length ? (
            <form
              className="stack"
              onSubmit={(e) => {
                e.preventDefault();
                void apply({ canary, canaryPercent: percent });
              }}
            >
              <div className="form-row">
                <label className="field">
                  <span>Canary revision</span>
                  <select value={canary} onChange={(e) => setCanary(e.target.value)}>
                    {others.map((r) => (
                      <option key={r.id} value={r.id}>
                        {r.id} ({ago(r.createdAt)})
                      </option>
                    ))}
                  </select>
                </label>
              </div>
              <label className="field">
                <span>Canary share</span>
                <div className="slider-row">
                  <input
                    type="range"
                    min={0}
                    max={100}
                    step={5}
                    value={percent}
                    onChange={(e) => setPercent(Number(e.target.value))}
                    aria-label="Canary share (percent)"
                  />
                  <output className="mono">{percent}%</output>
                </div>
              </label>
              <div className="row">
                <button type="submit" className="btn btn-primary" disabled={saving}>
                  {saving ? 'Applying…' : 'Apply split'}
                </button>
              </div>
            </form>
          ) : !others.length ? (
            <p className="muted">A canary needs a second revision: deploy new code to get one.</p>
          ) : null}
          <ProblemBanner error={error} />
        </div>
      </Card>
      <Card title="Revisions" flush>
        <ProblemBanner error={revs.error} />
        {list.length ? (
          <table className="table" aria-label="Revisions">
            <thead>
              <tr>
                <th>Revision</th>
                <th>Role</th>
                <th>Built</th>
                <th>Start command</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {list.map((r) => (
                <tr key={r.id}>
                  <td className="mono">{r.id}</td>
                  <td>
                    {r.id === active ? (
                      <span className="badge badge-ok">active</span>
                    ) : r.id === obj.canaryRevision && shown ? (
                      <span className="badge badge-warn">canary {shown}%</span>
                    ) : (
                      <span className="muted">—</span>
                    )}
                  </td>
                  <td title={when(r.createdAt)}>{ago(r.createdAt)}</td>
                  <td className="mono">{r.start}</td>
                  <td>
                    {canWrite && r.id !== active ? (
                      <button
                        type="button"
                        className="btn btn-sm"
                        disabled={saving}
                        onClick={() => apply({ active: r.id, canaryPercent: 0 })}
                      >
                        Make active
                      </button>
                    ) : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : (
          <Empty>No revision built yet.</Empty>
        )}
      </Card>
    </div>
  );
}
