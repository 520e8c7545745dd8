// Members of the workspace and their roles; admins add members, change roles and remove them.
import { useState } from 'react';
import { api } from '../api/client';
import { ago } from '../components/format';
import { ConfirmButton } from '../components/Modal';
import { Card, Empty, PageHead } from '../components/Page';
import { ProblemBanner } from '../components/ProblemBanner';
import { Spinner } from '../components/Spinner';
import { useCaller, useCan } from '../state/caller';
import { useAsync } from '../state/hooks';

export default function Members() {
  const caller = useCaller();
  const isAdmin = useCan('admin');
  const base = `/workspaces/${encodeURIComponent(caller.workspace)}/members`;
  const list = useAsync((signal) => api<any[]>('GET', base, { signal }), [base]);
  const [subject, setSubject] = useState('');
  const [role, setRole] = useState('member');
  const [error, setError] = useState<unknown>();
  async function setMember(s: string, r: string) {
    setError(undefined);
    try {
      await api('PUT', `${base}/${encodeURIComponent(s)}`, { body: { role: r } });
      list.reload();
    } catch (err) {
      setError(err);
    }
  }
  return (
    <div className="stack">
      <PageHead title="Members" sub={`Who may act in ${caller.workspace}, and how.`} />
      {isAdmin ? (
        <Card title="Add a member">
          <form
            className="row"
            onSubmit={(e) => {
              e.preventDefault();
              void setMember(subject.trim(), role).then(() => setSubject(''));
            }}
          >
            <label className="field" style={{ flex: 1, minWidth: 220 }}>
              <span>Subject (a service account's client ID, or a user)</span>
              <input className="mono" value={subject} onChange={(e) => setSubject(e.target.value)} required />
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
              disabled={!subject.trim()}
            >
              Add
            </button>
          </form>
        </Card>
      ) : null}
      <ProblemBanner error={error ?? list.error} />
      <Card flush>
        {list.loading && !list.data ? (
          <Spinner />
        ) : (list.data ?? []).length ? (
          <table className="table" aria-label="Members">
            <thead>
              <tr>
                <th>Subject</th>
                <th>Type</th>
                <th>Role</th>
                <th>Since</th>
                {isAdmin ? <th /> : null}
              </tr>
            </thead>
            <tbody>
              {(list.data ?? []).map((m) => (
                <tr key={m.subject}>
                  <td className="mono">
                    {m.subject}
                    {m.subject === caller.subject ? (
                      <span className="badge plain badge-accent"> you</span>
                    ) : null}
                  </td>
                  <td>{m.subType === 'service_account' ? 'service account' : 'user'}</td>
                  <td>
                    {isAdmin ? (
                      <select
                        aria-label={`Role of ${m.subject}`}
                        value={m.role}
                        onChange={(e) => void setMember(m.subject, e.target.value)}
                      >
                        <option value="viewer">viewer</option>
                        <option value="member">member</option>
                        <option value="admin">admin</option>
                      </select>
                    ) : (
                      <span className={`role-badge role-${m.role}`}>{m.role}</span>
                    )}
                  </td>
                  <td className="muted">{ago(m.createdAt)}</td>
                  {isAdmin ? (
                    <td>
                      <ConfirmButton
                        small
                        label="Remove"
                        title={`Remove ${m.subject}?`}
                        message="It can no longer act in this workspace."
                        onConfirm={async () => {
                          await api('DELETE', `${base}/${encodeURIComponent(m.subject)}`);
                          list.reload();
                        }}
                      />
                    </td>
                  ) : null}
                </tr>
              ))}
            </tbody>
          </table>
        ) : (
          <Empty>No members.</Empty>
        )}
      </Card>
    </div>
  );
}
