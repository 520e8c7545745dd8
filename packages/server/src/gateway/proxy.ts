// Forwards one HTTP request to a sandbox (its daemon over the unix socket, or for /port/{n} the port itself,
// see ports.ts) and streams the answer back. Neither body is buffered: the request is piped up as it arrives,
// the response written down chunk by chunk (an NDJSON exec stream or a file watch reaches the client line by
// line). The sandbox's own status codes and error bodies pass through untouched; only a sandbox that cannot be
// reached becomes a 502.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import { ApiError } from '../errors.js';
import { HOP_BY_HOP } from '../http/hop-by-hop.js';
import { CREDENTIAL_HEADERS, PREVIEW_TOKEN_HEADERS, withoutTokenCookie } from './auth.js';
import { matchPort, portHost, portPool, portUnreachable } from './ports.js';
import { scopeSetCookies } from './preview-cookies.js';
import { sendProblem } from '../http/problem.js';
import type { Target } from './targets.js';

/** Request headers never forwarded: hop-by-hop ones, ones undici sets itself, Berth's credentials. */
const DROPPED = new Set([...HOP_BY_HOP, 'expect', 'host', ...CREDENTIAL_HEADERS, ...PREVIEW_TOKEN_HEADERS]);

/** The request headers the sandbox sees: the caller's, minus Berth credentials and hop-by-hop ones. */
export function upstreamHeaders(req: IncomingMessage): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  const h = req.headers;
  for (const name in h) {
    const v = h[name];
    if (v !== undefined && !DROPPED.has(name)) out[name] = v;
  }
  if (typeof out.cookie === 'string') {
    // A private preview's token cookie is Berth's, not the application's.
    const kept = withoutTokenCookie(out.cookie);
    if (kept) out.cookie = kept;
    else delete out.cookie;
  }
  const host = h.host;
  if (host) out['x-forwarded-host'] = host;
  const addr = req.socket.remoteAddress;
  if (addr) out['x-forwarded-for'] = h['x-forwarded-for'] ? `${h['x-forwarded-for']}, ${addr}` : addr;
  out['x-forwarded-proto'] = (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http';
  return out;
}

function downstreamHeaders(h: IncomingHttpHeaders): IncomingHttpHeaders {
  for (const name of HOP_BY_HOP) delete h[name];
  return h;
}

const hasBody = (req: IncomingMessage) =>
  req.headers['content-length'] !== undefined
    ? req.headers['content-length'] !== '0'
    : req.headers['transfer-encoding'] !== undefined;

/** Maps a failure to reach the daemon to the gateway status DESIGN.md §4 reserves for a down workload. */
function daemonUnreachable(t: Target, err: Error & { code?: string }): ApiError {
  const name = JSON.stringify(t.key.name);
  if (err.code === 'UND_ERR_HEADERS_TIMEOUT' || err.code === 'UND_ERR_CONNECT_TIMEOUT')
    return new ApiError('TIMEOUT', `sandbox ${name} did not answer in time`);
  return new ApiError('BAD_GATEWAY', `sandbox ${name} is unreachable: ${err.code ?? err.message}`);
}

/** Headers a preview adds (its spec's requestHeaders and responseHeaders, and a token cookie). */
export interface ForwardExtra {
  requestHeaders?: Record<string, string>;
  responseHeaders?: Record<string, string>;
  /** A preview's path prefix ('/' for a host of its own): every Set-Cookie is kept to it (preview-cookies.ts). */
  cookieScope?: string;
  /** Sees the upstream answer's status and headers before they are sent on (affinity.ts pins MCP sessions). */
  onResponse?: (statusCode: number, headers: IncomingHttpHeaders) => void;
  /**
   * Told when the upstream could not be reached before any header left (not a cut, not a client gone); an ApiError
   * returned is the answer instead of the 502 (workloads.ts: a dead replica's MCP session answers 404).
   */
  onUnreachable?: (err: Error & { code?: string }) => ApiError | undefined;
  /** Cuts the forwarding: an ApiError reason is the client's answer when no header has left yet (request-deadlines.ts). */
  signal?: AbortSignal;
}

/** Forwards `req` to `path` (the part after the sandbox's address) and calls `done` once it is over. */
export function forward(
  t: Target,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  done: () => void,
  extra: ForwardExtra = {},
): void {
  const port = matchPort(path);
  if (port) {
    const headers = { ...upstreamHeaders(req), ...extra.requestHeaders, host: portHost(port.port) };
    send(portPool(t, port.port), req, res, port.path, headers, done, extra, (err) =>
      portUnreachable(t, port.port, err),
    );
  } else
    send(t.conn.pool, req, res, path, upstreamHeaders(req), done, extra, (err) => daemonUnreachable(t, err));
}

function addResponseHeaders(h: IncomingHttpHeaders, extra: Record<string, string> | undefined) {
  for (const [k, v] of Object.entries(extra ?? {})) {
    const name = k.toLowerCase();
    const cur = h[name];
    if (name === 'set-cookie' && cur !== undefined) h[name] = [...(Array.isArray(cur) ? cur : [cur]), v];
    else h[name] = v;
  }
}

function send(
  upstream: Dispatcher,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  headers: Record<string, string | string[]>,
  done: () => void,
  extra: ForwardExtra,
  unreachable: (err: Error & { code?: string }) => ApiError,
): void {
  const ac = new AbortController();
  // A client gone before the answer started must not leave the sandbox's request running.
  const onClose = () => {
    if (!res.writableFinished) ac.abort();
  };
  res.once('close', onClose);
  const onCut = () => ac.abort(extra.signal?.reason);
  extra.signal?.addEventListener('abort', onCut, { once: true });
  const opts: Dispatcher.RequestOptions = {
    path,
    method: req.method as Dispatcher.HttpMethod,
    headers,
    body: hasBody(req) ? req : undefined,
    signal: ac.signal,
  };
  upstream.stream(
    opts,
    ({ statusCode, headers }) => {
      const h = downstreamHeaders(headers as IncomingHttpHeaders);
      extra.onResponse?.(statusCode, h);
      addResponseHeaders(h, extra.responseHeaders);
      if (extra.cookieScope !== undefined) {
        const scoped = scopeSetCookies(h['set-cookie'], extra.cookieScope);
        if (scoped) h['set-cookie'] = scoped;
        else delete h['set-cookie'];
      }
      res.writeHead(statusCode, h);
      // A body of unknown length is a stream (watch, logs, exec): its headers go out now, not with its first
      // chunk, so the client sees it open at once. Sized bodies leave with their headers in one write.
      if (h['content-length'] === undefined) res.flushHeaders();
      return res;
    },
    (err) => {
      res.removeListener('close', onClose);
      extra.signal?.removeEventListener('abort', onCut);
      const cut =
        extra.signal?.aborted && extra.signal.reason instanceof ApiError ? extra.signal.reason : undefined;
      if (err && res.destroyed) {
        // The client went away; nothing to answer.
      } else if (err && !res.headersSent) {
        const e = err as Error & { code?: string };
        sendProblem(res, cut ?? extra.onUnreachable?.(e) ?? unreachable(e));
      } else if (err) res.destroy();
      done();
    },
  );
}
