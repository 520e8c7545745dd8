// One job: its executions, starting one with overrides, and an execution's tasks (status, attempts, duration)
// with each task's output. Executions are not objects the watch carries: an open execution is read again every
// two seconds while it runs, and the list while any runs.
import { useState } from 'react';
import { Link, useLocation } from 'wouter';
import { api, get } from '../api/client';
import { ago, duration, when } from '../components/format';
import { EventList } from '../components/Events';
import { LogView, useFollowedText } from '../components/LogView';
import { ConfirmButton, Modal } from '../components/Modal';
import { Card, Empty, PageHead } from '../components/Page';
import { ProblemBanner } from '../components/ProblemBanner';
import { Spinner } from '../components/Spinner';
import { StatusBadge } from '../components/Status';
import { useCan } from '../state/caller';
import { useAsync, useInterval } from '../state/hooks';
import { useLiveObject } from '../state/live';

const FINISHED = new Set(['succeeded', 'failed', 'cancelled', 'SUCCEEDED', 'FAILED', 'CANCELLED']);

export default function JobPage({ params }: { params: { name: string; execution?: string } }) {
  const name = decodeURIComponent(params.name);
  const path = `/jobs/${encodeURIComponent(name)}`;
  const [, navigate] = useLocation();
  const canWrite = useCan('member');
  const { obj: job, error } = useLiveObject('jobs', name, () => get(path));
  const execs = useAsync((signal) => api<any[]>('GET', `${path}/executions`, { signal }), [path]);
  const running = (execs.data ?? []).some((e) => !FINISHED.has(e.status));
  useInterval(() => running && execs.reload(), running ? 2000 : null);
  const [starting, setStarting] = useState(false);

  return (
    <div className="stack">
      <PageHead
        crumbs={[{ to: '/jobs', label: 'Jobs' }]}
        title={name}
        badge={job ? <StatusBadge status={job.status} /> : null}
        sub={
          job
            ? `${job.spec?.runtime?.maxConcurrentTasks ?? 1} tasks at a time · ${job.spec?.runtime?.maxRetries ?? 0} retries · timeout ${job.spec?.runtime?.timeout ?? 900} s`
            : undefined
        }
        actions={
          canWrite && job ? (
            <>
              <button type="button" className="btn btn-primary" onClick={() => setStarting(true)}>
                Start execution
              </button>
              <ConfirmButton
                label="Delete"
                title={`Delete job ${name}?`}
                message="Its running executions are cancelled."
                onConfirm={async () => {
                  await api('DELETE', path);
                  navigate('/jobs');
                }}
              />
            </>
          ) : null
        }
      />
      <ProblemBanner error={error} />
      {params.execution ? (
        <Execution job={name} id={decodeURIComponent(params.execution)} />
      ) : (
        <div className="grid grid-2">
          <Card title="Executions" flush>
            <ProblemBanner error={execs.error} />
            {execs.loading && !execs.data ? (
              <Spinner />
            ) : (execs.data ?? []).length ? (
              <table className="table" aria-label="Executions">
                <thead>
                  <tr>
                    <th>Execution</th>
                    <th>Status</th>
                    <th>Tasks</th>
                    <th>Retried</th>
                    <th>Started</th>
                  </tr>
                </thead>
                <tbody>
                  {[...(execs.data ?? [])]
                    .sort((a, b) => String(b.metadata.createdAt).localeCompare(String(a.metadata.createdAt)))
                    .map((e) => (
                      <tr key={e.metadata.id}>
                        <td>
                          <Link href={`${path}/${encodeURIComponent(e.metadata.id)}`} className="mono">
                            {e.metadata.id}
                          </Link>
                        </td>
                        <td>
                          <StatusBadge status={e.status} />
                        </td>
                        <td>
                          {e.stats?.success ?? 0}/{e.stats?.total ?? 0} ok
                          {e.stats?.failure ? (
                            <span className="muted"> · {e.stats.failure} failed</span>
                          ) : null}
                        </td>
                        <td>{e.stats?.retried ?? 0}</td>
                        <td className="muted">{ago(e.metadata.createdAt)}</td>
                      </tr>
                    ))}
                </tbody>
              </table>
            ) : (
              <Empty>No executions yet.</Empty>
            )}
          </Card>
          <Card title="Events" flush>
            <EventList events={job?.events} />
          </Card>
        </div>
      )}
      <StartExecution
        open={starting}
        job={name}
        onClose={() => setStarting(false)}
        onStarted={(id) => {
          setStarting(false);
          execs.reload();
          navigate(`${path}/${encodeURIComponent(id)}`);
        }}
      />
    </div>
  );
}

function Execution({ job, id }: { job: string; id: string }) {
  const path = `/jobs/${encodeURIComponent(job)}/executions/${encodeURIComponent(id)}`;
  const canWrite = useCan('member');
  const e = useAsync((signal) => api('GET', path, { signal }), [path]);
  const done = e.data && FINISHED.has(e.data.status);
  useInterval(() => !done && e.reload(), done ? null : 2000);
  const [task, setTask] = useState<number | null>(null);
  const log = useFollowedText(task === null ? null : `/v0${path}/tasks/${task}/logs?follow=true`, `${task}`);
  const x = e.data;
  return (
    <div className="stack">
      <ProblemBanner error={e.error} />
      {!x ? (
        <Spinner />
      ) : (
        <>
          <Card
            title={
              <div className="row">
                <h2 className="mono">{id}</h2>
                <StatusBadge status={x.status} />
              </div>
            }
            actions={
              canWrite && !done ? (
                <ConfirmButton
                  label="Cancel execution"
                  title="Cancel this execution?"
                  message="Its running tasks are stopped; pending ones never start."
                  confirmLabel="Cancel execution"
                  onConfirm={async () => {
                    await api('DELETE', path);
                    e.reload();
                  }}
                />
              ) : null
            }
          >
            <div className="grid grid-4">
              <div>
                <div className="stat-label">Tasks</div>
                <div className="stat-value">{x.stats?.total}</div>
              </div>
              <div>
                <div className="stat-label">Succeeded</div>
                <div className="stat-value">{x.stats?.success}</div>
              </div>
              <div>
                <div className="stat-label">Failed</div>
                <div className="stat-value">{x.stats?.failure}</div>
              </div>
              <div>
                <div className="stat-label">Retried</div>
                <div className="stat-value">{x.stats?.retried}</div>
              </div>
            </div>
            <p className="muted">
              Revision <span className="mono">{x.revision}</span> · started {when(x.metadata.startedAt)}
              {x.metadata.completedAt
                ? ` · took ${duration(Date.parse(x.metadata.completedAt) - Date.parse(x.metadata.startedAt ?? x.metadata.createdAt))}`
                : ''}
            </p>
          </Card>
          <div className="grid grid-2">
            <Card title="Tasks" flush>
              <table className="table" aria-label="Tasks">
                <thead>
                  <tr>
                    <th>#</th>
                    <th>Status</th>
                    <th>Attempts</th>
                    <th>Exit</th>
                    <th>Duration</th>
                    <th />
                  </tr>
                </thead>
                <tbody>
                  {(x.tasks ?? []).map((t: any) => (
                    <tr key={t.index} aria-selected={task === t.index}>
                      <td>{t.index}</td>
                      <td>
                        <StatusBadge status={t.status} title={t.conditions?.at(-1)?.message} />
                      </td>
                      <td>{t.attempts}</td>
                      <td className="mono">{t.exitCode ?? '—'}</td>
                      <td>
                        {t.metadata.startedAt
                          ? duration(
                              (t.metadata.completedAt ? Date.parse(t.metadata.completedAt) : Date.now()) -
                                Date.parse(t.metadata.startedAt),
                            )
                          : '—'}
                      </td>
                      <td>
                        <button type="button" className="btn btn-sm" onClick={() => setTask(t.index)}>
                          Logs
                        </button>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </Card>
            <Card title={task === null ? 'Task output' : `Task ${task} output`}>
              {task === null ? (
                <Empty>Pick a task to read its output.</Empty>
              ) : (
                <LogView label={`Task ${task} output`} text={log.text} error={log.error} />
              )}
            </Card>
          </div>
        </>
      )}
    </div>
  );
}

function StartExecution({
  open,
  job,
  onClose,
  onStarted,
}: {
  open: boolean;
  job: string;
  onClose: () => void;
  onStarted: (id: string) => void;
}) {
  const [tasks, setTasks] = useState('[{}]');
  const [env, setEnv] = useState('');
  const [memory, setMemory] = useState('');
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  async function start() {
    setBusy(true);
    setError(undefined);
    try {
      const body: Record<string, unknown> = { tasks: JSON.parse(tasks) };
      const envs = Object.fromEntries(
        env
          .split('\n')
          .map((l) => l.trim())
          .filter(Boolean)
          .map((l) => [
            l.slice(0, l.indexOf('=') < 0 ? l.length : l.indexOf('=')),
            l.includes('=') ? l.slice(l.indexOf('=') + 1) : '',
          ]),
      );
      if (Object.keys(envs).length) body.env = envs;
      if (memory.trim()) body.memory = Number(memory);
      const r = await api('POST', `/jobs/${encodeURIComponent(job)}/executions`, { body });
      onStarted(r.executionId ?? r.id);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }
  return (
    <Modal
      open={open}
      title="Start an execution"
      onClose={onClose}
      footer={
        <>
          <button type="button" className="btn" onClick={onClose}>
            Cancel
          </button>
          <button type="button" className="btn btn-primary" disabled={busy} onClick={start}>
            {busy ? 'Starting…' : 'Start'}
          </button>
        </>
      }
    >
      <label className="field">
        <span>Tasks (a JSON array: each task's input)</span>
        <textarea value={tasks} onChange={(e) => setTasks(e.target.value)} rows={4} />
      </label>
      <label className="field">
        <span>Environment overrides (NAME=value per line)</span>
        <textarea value={env} onChange={(e) => setEnv(e.target.value)} rows={2} />
      </label>
      <label className="field">
        <span>Memory override (MB)</span>
        <input
          type="number"
          min={64}
          value={memory}
          onChange={(e) => setMemory(e.target.value)}
          placeholder="the job's own"
        />
      </label>
      <ProblemBanner error={error} />
    </Modal>
  );
}
