// A shell in the sandbox: xterm.js over the sandbox API's terminal WebSocket (GET /terminal/ws through the gateway).
// The browser cannot set Authorization on a WebSocket, so the key travels as a subprotocol the gateway takes out
// before the sandbox sees the request (docs/decisions/045-web-console.md). Resize follows the box; copy and paste
// work with the keyboard (Ctrl+Shift+C / Ctrl+Shift+V) and the buttons.
import { FitAddon } from '@xterm/addon-fit';
import { Terminal as XTerm } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';
import { useEffect, useRef, useState } from 'react';
import { sandboxPath } from '../../api/client';
import { getSession } from '../../api/session';
import { Card } from '../../components/Page';
import { cssVar } from '../../state/theme';

/** The subprotocol that carries the key (gateway/ws-credential.ts), base64url so it is a valid token. */
export function bearerProtocol(key: string) {
  const b = btoa(String.fromCharCode(...new TextEncoder().encode(key)));
  return `base64url.bearer.berth.${b.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')}`;
}

type State = 'connecting' | 'open' | 'closed';

/** The element xterm.js's style elements are made as instead (hidden by the stylesheet, read by mirrorStyles). */
const INERT_STYLE = 'berth-style';

/**
 * xterm.js writes the styles it computes (cell sizes, theme colours) into <style> elements it makes and appends,
 * which the page's Content-Security-Policy refuses (no inline style; each insertion would also be reported as a
 * violation). While a terminal is open, a <style> the page makes is born as an inert element instead, and the text
 * xterm.js writes into it is mirrored into a constructed stylesheet, which the policy does not govern: the console's
 * own code sets these styles, as it sets element styles through the DOM. Nothing else in the console makes <style>
 * elements. Returns the undo.
 */
function mirrorStyles(): () => void {
  const create = document.createElement;
  document.createElement = function (this: Document, tag: string, options?: ElementCreationOptions) {
    return create.call(this, tag.toLowerCase() === 'style' ? INERT_STYLE : tag, options);
  } as typeof document.createElement;
  const sheets = new Map<Element, { sheet: CSSStyleSheet; text: string }>();
  const sync = () => {
    for (const el of document.querySelectorAll(INERT_STYLE)) {
      const text = el.textContent ?? '';
      let m = sheets.get(el);
      if (!m) {
        m = { sheet: new CSSStyleSheet(), text: '' };
        sheets.set(el, m);
        document.adoptedStyleSheets = [...document.adoptedStyleSheets, m.sheet];
      }
      if (m.text !== text) {
        m.sheet.replaceSync(text);
        m.text = text;
      }
    }
  };
  // Where xterm.js puts them is its own business: the whole document is watched while a terminal is open.
  const mo = new MutationObserver(sync);
  mo.observe(document.documentElement, { subtree: true, childList: true, characterData: true });
  return () => {
    document.createElement = create;
    mo.disconnect();
    const gone = new Set([...sheets.values()].map((m) => m.sheet));
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((x) => !gone.has(x));
  };
}

export default function Terminal({ name }: { name: string }) {
  const box = useRef<HTMLDivElement>(null);
  const term = useRef<XTerm | null>(null);
  const [state, setState] = useState<State>('connecting');
  const [note, setNote] = useState('');
  const [generation, setGeneration] = useState(0);

  // biome-ignore lint/correctness/useExhaustiveDependencies: generation reconnects
  useEffect(() => {
    const el = box.current;
    const key = getSession()?.key;
    if (!el || !key) return;
    const unmirror = mirrorStyles();
    const t = new XTerm({
      cursorBlink: true,
      fontFamily: cssVar('--mono') || 'monospace',
      fontSize: 13,
      theme: { background: cssVar('--term-bg'), foreground: cssVar('--term-fg') },
      scrollback: 5000,
    });
    const fit = new FitAddon();
    t.loadAddon(fit);
    t.open(el);
    fit.fit();
    term.current = t;
    setState('connecting');
    setNote('');
    const proto = location.protocol === 'https:' ? 'wss' : 'ws';
    const url = `${proto}://${location.host}${sandboxPath(name, '/terminal/ws')}?cols=${t.cols}&rows=${t.rows}`;
    const ws = new WebSocket(url, ['berth.terminal', bearerProtocol(key)]);
    ws.binaryType = 'arraybuffer';
    const dec = new TextDecoder();
    ws.onopen = () => {
      setState('open');
      t.focus();
    };
    ws.onmessage = (ev) => {
      if (typeof ev.data === 'string') {
        try {
          const msg = JSON.parse(ev.data);
          if (msg.type === 'exit') {
            setNote(`The shell exited with code ${msg.exitCode}.`);
            return;
          }
        } catch {}
        t.write(ev.data);
      } else t.write(dec.decode(new Uint8Array(ev.data), { stream: true }));
    };
    ws.onclose = (ev) => {
      setState('closed');
      if (ev.code !== 1000)
        setNote((n) => n || `Disconnected (${ev.code}${ev.reason ? `: ${ev.reason}` : ''}).`);
    };
    const input = t.onData(
      (d) => ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify({ type: 'input', data: d })),
    );
    const resize = t.onResize(({ cols, rows }) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'resize', cols, rows }));
    });
    const ro = new ResizeObserver(() => fit.fit());
    ro.observe(el);
    return () => {
      ro.disconnect();
      input.dispose();
      resize.dispose();
      ws.close();
      t.dispose();
      unmirror();
      term.current = null;
    };
  }, [name, generation]);

  return (
    <Card
      title={
        <div className="row">
          <h2>Terminal</h2>
          <span
            className={`badge ${state === 'open' ? 'badge-ok' : state === 'connecting' ? 'badge-warn' : ''}`}
          >
            {state}
          </span>
        </div>
      }
      actions={
        <>
          <button
            type="button"
            className="btn btn-sm"
            onClick={() => {
              const sel = term.current?.getSelection();
              if (sel) void navigator.clipboard.writeText(sel);
            }}
          >
            Copy
          </button>
          <button
            type="button"
            className="btn btn-sm"
            onClick={async () => {
              const text = await navigator.clipboard.readText().catch(() => '');
              if (text) term.current?.paste(text);
              term.current?.focus();
            }}
          >
            Paste
          </button>
          <button type="button" className="btn btn-sm" onClick={() => setGeneration((g) => g + 1)}>
            Reconnect
          </button>
        </>
      }
    >
      {note ? <div className="banner banner-info">{note}</div> : null}
      <section className="terminal-box" ref={box} aria-label="Terminal" data-state={state} />
    </Card>
  );
}
