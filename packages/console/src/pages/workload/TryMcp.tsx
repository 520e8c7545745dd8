// The MCP server's tools, listed and called like an MCP inspector does: a form per tool from its input schema.
import { useEffect, useRef, useState } from 'react';
import type { Tool } from '../../api/mcp';
import { Card, Empty } from '../../components/Page';
import { ProblemBanner } from '../../components/ProblemBanner';
import { Spinner } from '../../components/Spinner';

type Client = Awaited<ReturnType<typeof import('../../api/mcp').connect>>;

export function TryMcp({ name }: { name: string }) {
  const client = useRef<Client | null>(null);
  const [tools, setTools] = useState<Tool[] | null>(null);
  const [picked, setPicked] = useState<Tool | null>(null);
  const [error, setError] = useState<unknown>();
  const [result, setResult] = useState<any>();
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    let closed = false;
    setTools(null);
    setError(undefined);
    import('../../api/mcp')
      .then((m) => m.connect(name))
      .then(async (c) => {
        if (closed) return void c.close();
        client.current = c;
        const list = await c.listTools();
        setTools(list.tools as Tool[]);
        setPicked((list.tools[0] as Tool) ?? null);
      })
      .catch((err) => !closed && setError(err));
    return () => {
      closed = true;
      void client.current?.close();
      client.current = null;
    };
  }, [name]);

  async function call(args: Record<string, unknown>) {
    if (!client.current || !picked) return;
    setBusy(true);
    setError(undefined);
    setResult(undefined);
    try {
      setResult(await client.current.callTool({ name: picked.name, arguments: args }));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  if (!tools && !error) return <Spinner label="Connecting to the MCP server" />;
  return (
    <div className="stack">
      <ProblemBanner error={error} />
      {tools ? (
        <div className="grid grid-2">
          <Card title={`Tools (${tools.length})`}>
            {tools.length ? (
              <div className="stack tool-list">
                {tools.map((t) => (
                  <button
                    key={t.name}
                    type="button"
                    className="btn"
                    aria-pressed={picked?.name === t.name}
                    onClick={() => {
                      setPicked(t);
                      setResult(undefined);
                    }}
                  >
                    <strong className="mono">{t.name}</strong>
                    <span className="muted">{t.description}</span>
                  </button>
                ))}
              </div>
            ) : (
              <Empty>The server lists no tools.</Empty>
            )}
          </Card>
          {picked ? (
            <Card title={<h2 className="mono">{picked.name}</h2>}>
              <ToolForm key={picked.name} tool={picked} busy={busy} onCall={call} />
              {result ? (
                <div className="stack" style={{ marginTop: 16 }}>
                  <div className="row">
                    <span className={`badge ${result.isError ? 'badge-bad' : 'badge-ok'}`}>
                      {result.isError ? 'tool error' : 'result'}
                    </span>
                  </div>
                  {(result.content ?? []).map((c: any, i: number) =>
                    c.type === 'text' ? (
                      // biome-ignore lint/suspicious/noArrayIndexKey: content parts have no id
                      <pre key={i} className="json" data-label="Tool result">
                        {c.text}
                      </pre>
                    ) : (
                      // biome-ignore lint/suspicious/noArrayIndexKey: content parts have no id
                      <pre key={i} className="json">
                        {JSON.stringify(c, null, 2)}
                      </pre>
                    ),
                  )}
                  {result.structuredContent ? (
                    <pre className="json">{JSON.stringify(result.structuredContent, null, 2)}</pre>
                  ) : null}
                </div>
              ) : null}
            </Card>
          ) : null}
        </div>
      ) : null}
    </div>
  );
}

/** A field per property of the input schema: text, number, checkbox, a choice for enums, JSON for the rest. */
function ToolForm({
  tool,
  busy,
  onCall,
}: {
  tool: Tool;
  busy: boolean;
  onCall: (a: Record<string, unknown>) => void;
}) {
  const props = Object.entries(tool.inputSchema?.properties ?? {});
  const required = new Set(tool.inputSchema?.required ?? []);
  const [values, setValues] = useState<Record<string, string | boolean>>({});
  const [error, setError] = useState<string>();
  const set = (k: string, v: string | boolean) => setValues((x) => ({ ...x, [k]: v }));
  function args(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [k, s] of props) {
      const v = values[k];
      if (v === undefined || v === '') continue;
      const type = Array.isArray(s.type) ? s.type[0] : s.type;
      if (type === 'number' || type === 'integer') out[k] = Number(v);
      else if (type === 'boolean') out[k] = v === true;
      else if (type === 'object' || type === 'array') out[k] = JSON.parse(String(v));
      else out[k] = v;
    }
    return out;
  }
  return (
    <form
      className="form"
      onSubmit={(e) => {
        e.preventDefault();
        setError(undefined);
        try {
          onCall(args());
        } catch (err) {
          setError(`not valid JSON: ${(err as Error).message}`);
        }
      }}
    >
      {tool.description ? <p className="muted">{tool.description}</p> : null}
      {props.length ? null : <p className="muted">This tool takes no arguments.</p>}
      {props.map(([k, s]) => {
        const type = Array.isArray(s.type) ? s.type[0] : s.type;
        const label = (
          <span>
            {k}
            {required.has(k) ? ' *' : ''} <span className="muted">{type}</span>
          </span>
        );
        if (type === 'boolean')
          return (
            <label key={k} className="check">
              <input
                type="checkbox"
                checked={values[k] === true}
                onChange={(e) => set(k, e.target.checked)}
              />
              {label}
            </label>
          );
        const id = `tool-arg-${k}`;
        return (
          <div key={k} className="field">
            <label htmlFor={id}>{label}</label>
            {s.enum ? (
              <select
                id={id}
                value={String(values[k] ?? '')}
                onChange={(e) => set(k, e.target.value)}
                required={required.has(k)}
              >
                <option value="" />
                {s.enum.map((v: string) => (
                  <option key={v} value={v}>
                    {v}
                  </option>
                ))}
              </select>
            ) : type === 'object' || type === 'array' ? (
              <textarea
                id={id}
                value={String(values[k] ?? '')}
                onChange={(e) => set(k, e.target.value)}
                required={required.has(k)}
              />
            ) : (
              <input
                id={id}
                type={type === 'number' || type === 'integer' ? 'number' : 'text'}
                step={type === 'integer' ? 1 : 'any'}
                value={String(values[k] ?? '')}
                onChange={(e) => set(k, e.target.value)}
                required={required.has(k)}
                name={k}
              />
            )}
            {s.description ? <small className="muted">{s.description}</small> : null}
          </div>
        );
      })}
      {error ? <div className="banner banner-error">{error}</div> : null}
      <div className="row">
        <button type="submit" className="btn btn-primary" disabled={busy}>
          {busy ? 'Calling…' : 'Call tool'}
        </button>
      </div>
    </form>
  );
}
