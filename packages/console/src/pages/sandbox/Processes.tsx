// Processes of the sandbox (GET/POST /process), each with its logs followed live and a stop button.
import { useState } from 'react';
import { sandboxApi, sandboxPath } from '../../api/client';
import { ago } from '../../components/format';
import { LogView, useFollowedText } from '../../components/LogView';
import { Card, Empty } from '../../components/Page';
import { ProblemBanner } from '../../components/ProblemBanner';
import { StatusBadge } from '../../components/Status';
import { useAsync, useInterval } from '../../state/hooks';

export function Processes({ name }: { name: string }) {
  const list = useAsync((signal) => sandboxApi<any[]>(name, 'GET', '/process', { signal }), [name]);
  const [selected, setSelected] = useState<string | null>(null);
  const [command, setCommand] = useState('');
  const [pname, setPname] = useState('');
  const [error, setError] = useState<unknown>();
  const running = (list.data ?? []).some((p) => p.status === 'running');
  // Process state lives in the sandbox's own API, which has no watch of processes: re-read while any runs.
  useInterval(() => running && list.reload(), running ? 3000 : null);
  const logs = useFollowedText(
    selected ? sandboxPath(name, `/process/${encodeURIComponent(selected)}/logs/stream`) : null,
    selected,
  );

  async function start() {
    setError(undefined);
    try {
      const p = await sandboxApi(name, 'POST', '/process', {
        body: { command, ...(pname.trim() ? { name: pname.trim() } : {}), waitForCompletion: false },
      });
      setCommand('');
      setPname('');
      setSelected(p.name || p.pid);
      list.reload();
    } catch (err) {
      setError(err);
    }
  }
  async function stop(id: string) {
    setError(undefined);
    try {
      await sandboxApi(name, 'DELETE', `/process/${encodeURIComponent(id)}`);
      list.reload();
    } catch (err) {
      setError(err);
    }
  }

  const procs = [...(list.data ?? [])].reverse();
  return (
    <div className="stack">
      <Card title="Start a process">
        <form
          className="row"
          onSubmit={(e) => {
            e.preventDefault();
            void start();
          }}
        >
          <label className="field" style={{ flex: 3, minWidth: 240 }}>
            <span>Command</span>
            <input
              className="mono"
              value={command}
              onChange={(e) => setCommand(e.target.value)}
              placeholder="python3 -m http.server 3000"
            />
          </label>
          <label className="field" style={{ flex: 1, minWidth: 140 }}>
            <span>Name (optional)</span>
            <input value={pname} onChange={(e) => setPname(e.target.value)} placeholder="web" />
          </label>
          <button
            type="submit"
            className="btn btn-primary"
            disabled={!command.trim()}
            style={{ alignSelf: 'flex-end' }}
          >
            Start
          </button>
        </form>
        <ProblemBanner error={error} />
      </Card>
      <div className="grid grid-2">
        <Card
          title="Processes"
          flush
          actions={
            <button type="button" className="btn btn-sm" onClick={list.reload}>
              Refresh
            </button>
          }
        >
          <ProblemBanner error={list.error} />
          {procs.length ? (
            <table className="table" aria-label="Processes">
              <thead>
                <tr>
                  <th>Name</th>
                  <th>Command</th>
                  <th>Status</th>
                  <th>Started</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {procs.map((p) => (
                  <tr key={p.pid}>
                    <td>
                      <button
                        type="button"
                        className="btn btn-ghost btn-sm"
                        onClick={() => setSelected(p.name || p.pid)}
                      >
                        {p.name || p.pid}
                      </button>
                    </td>
                    <td className="mono">{p.command}</td>
                    <td>
                      <StatusBadge status={p.status} />
                      {p.status !== 'running' ? <span className="muted"> exit {p.exitCode}</span> : null}
                    </td>
                    <td className="muted">{ago(p.startedAt)}</td>
                    <td>
                      {p.status === 'running' ? (
                        <button
                          type="button"
                          className="btn btn-sm btn-danger"
                          onClick={() => stop(p.name || p.pid)}
                        >
                          Stop
                        </button>
                      ) : null}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : (
            <Empty>No processes.</Empty>
          )}
        </Card>
        <Card title={selected ? `Logs of ${selected}` : 'Logs'}>
          {selected ? (
            <LogView label={`Logs of ${selected}`} text={logs.text} error={logs.error} />
          ) : (
            <Empty>Pick a process to follow its output.</Empty>
          )}
        </Card>
      </div>
    </div>
  );
}
