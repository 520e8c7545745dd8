// Calls the agent at its own address, as any client would, with a thread id (the same thread keeps its replica).
// The traffic check sends a batch of calls and counts the answers by one of their fields, to see a canary split.
import { useState } from 'react';
import { ApiError, send, workloadPath } from '../../api/client';
import { duration } from '../../components/format';
import { Card } from '../../components/Page';
import { ProblemBanner } from '../../components/ProblemBanner';

export function TryAgent({ name }: { name: string; obj: any }) {
  const [body, setBody] = useState('{\n  "inputs": "Hello"\n}');
  const [thread, setThread] = useState(() => `console-${Math.random().toString(36).slice(2, 8)}`);
  const [answer, setAnswer] = useState<{ status: number; text: string; ms: number } | null>(null);
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const [field, setField] = useState('version');
  const [count, setCount] = useState(20);
  const [tally, setTally] = useState<Map<string, number> | null>(null);

  async function call(threadId?: string) {
    const t0 = performance.now();
    try {
      const res = await send('POST', workloadPath('agents', name), {
        raw: body,
        headers: {
          'content-type': 'application/json',
          ...(threadId ? { 'x-blaxel-thread-id': threadId } : {}),
        },
      });
      return { status: res.status, text: await res.text(), ms: performance.now() - t0 };
    } catch (err) {
      if (err instanceof ApiError)
        return { status: err.status, text: JSON.stringify(err.problem, null, 2), ms: performance.now() - t0 };
      throw err;
    }
  }

  async function once() {
    setBusy(true);
    setError(undefined);
    try {
      JSON.parse(body);
      setAnswer(await call(thread || undefined));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  async function split() {
    setBusy(true);
    setError(undefined);
    const seen = new Map<string, number>();
    try {
      // Without a thread id, so each call is routed on its own (a thread sticks to one revision).
      for (let i = 0; i < count; i++) {
        const a = await call();
        let key = `HTTP ${a.status}`;
        if (a.status < 300) {
          try {
            const v = field ? JSON.parse(a.text)?.[field] : a.text;
            key = v === undefined ? `(no ${field})` : String(v);
          } catch {
            key = a.text.slice(0, 40);
          }
        }
        seen.set(key, (seen.get(key) ?? 0) + 1);
        setTally(new Map(seen));
      }
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <div className="grid grid-2">
      <Card title="Call the agent">
        <form
          className="form"
          onSubmit={(e) => {
            e.preventDefault();
            void once();
          }}
        >
          <label className="field">
            <span>Thread id</span>
            <input value={thread} onChange={(e) => setThread(e.target.value)} />
          </label>
          <label className="field">
            <span>Request body (JSON)</span>
            <textarea value={body} onChange={(e) => setBody(e.target.value)} rows={6} />
          </label>
          <div className="row">
            <button type="submit" className="btn btn-primary" disabled={busy}>
              {busy ? 'Calling…' : 'Send'}
            </button>
          </div>
          <ProblemBanner error={error} />
        </form>
        {answer ? (
          <div className="stack" style={{ marginTop: 16 }}>
            <div className="row">
              <span className={`badge ${answer.status < 300 ? 'badge-ok' : 'badge-bad'}`}>
                HTTP {answer.status}
              </span>
              <span className="muted">{duration(answer.ms)}</span>
            </div>
            <pre className="json" data-label="Answer">
              {pretty(answer.text)}
            </pre>
          </div>
        ) : null}
      </Card>
      <Card title="Traffic check">
        <div className="form">
          <p className="muted">
            Sends {count} calls without a thread id and counts the answers by a field of their JSON, to see
            how the traffic splits between revisions.
          </p>
          <div className="form-row">
            <label className="field">
              <span>Count answers by field</span>
              <input value={field} onChange={(e) => setField(e.target.value)} />
            </label>
            <label className="field">
              <span>Calls</span>
              <input
                type="number"
                min={1}
                max={500}
                value={count}
                onChange={(e) => setCount(Number(e.target.value))}
              />
            </label>
          </div>
          <div className="row">
            <button type="button" className="btn" disabled={busy} onClick={split}>
              Send {count} calls
            </button>
          </div>
          {tally ? (
            <div className="split-tally" data-testid="split-tally">
              {[...tally.entries()].map(([k, n]) => {
                const total = [...tally.values()].reduce((a, b) => a + b, 0);
                return (
                  <div key={k}>
                    <div className="row">
                      <strong className="mono">{k}</strong>
                      <span className="muted">
                        {n} of {total} ({Math.round((n / total) * 100)}%)
                      </span>
                    </div>
                    <div className="bar">
                      <span style={{ width: `${(n / total) * 100}%` }} />
                    </div>
                  </div>
                );
              })}
            </div>
          ) : null}
        </div>
      </Card>
    </div>
  );
}

function pretty(text: string) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
