// Forwards one HTTP request to a sandbox (its daemon over the unix socket, or for /port/{n} the port itself,
// see ports.ts) and streams the answer back. Neither body is buffered: the request is piped up as it arrives,
// the response written down chunk by chunk (an NDJSON exec stream or a file watch reaches the client line by
// line). The sandbox's own status codes and error bodies pass through untouched; only a sandbox that cannot be
// reached becomes a 502.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { type Dispatcher, util } from 'undici';
import { ApiError } from '../errors.js';
import { connectionNamed, HOP_BY_HOP, hasBody } from '../http/hop-by-hop.js';
import { withoutScopeWidening } from './shared-origin.js';
import { CREDENTIAL_HEADERS, PREVIEW_TOKEN_HEADERS, withoutTokenCookie } from './auth.js';
import { matchPort, portHost, portPool, portUnreachable } from './ports.js';
import { scopeSetCookies } from './preview-cookies.js';
import { sendProblem } from '../http/problem.js';
import type { Target } from './targets.js';
import type { Cut } from './request-deadlines.js';

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
  for (const name of connectionNamed(h.connection)) delete out[name];
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
  for (const name of connectionNamed(h.connection)) delete h[name];
  for (const name of HOP_BY_HOP) delete h[name];
  return h;
}

/** Maps a failure to reach the daemon to the gateway status DESIGN.md §4 reserves for a down workload. */
export function daemonUnreachable(t: Target, err: Error & { code?: string }): ApiError {
  const name = JSON.stringify(t.key.name);
  if (err.code === 'UND_ERR_HEADERS_TIMEOUT' || err.code === 'UND_ERR_CONNECT_TIMEOUT')
    return new ApiError('TIMEOUT', `sandbox ${name} did not answer in time`);
  // The daemon went away mid-request: the sandbox most often ended (its events say why, `berth debug` too).
  return new ApiError(
    'BAD_GATEWAY',
    `sandbox ${name} is unreachable: ${err.code ?? err.message}. If it ended, its events say why (berth debug sandbox ${t.key.name})`,
  );
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
   * Told when the upstream could not be reached before any header left (not a cut, not a client gone); `sent` says
   * whether any byte of the request had been written to it. An ApiError returned is the answer instead of the 502
   * (workloads.ts: a dead replica's MCP session answers 404).
   */
  onUnreachable?: (err: Error & { code?: string }, sent: boolean) => ApiError | undefined;
  /**
   * Asked first when the upstream failed before any byte of the request was written to it (its connection was
   * refused or reset): true means the caller has taken the request over (sends it elsewhere and answers `res`), so
   * this relay answers nothing. The request's body is still unread then, so it can be sent again.
   */
  retry?: (err: Error & { code?: string }, res: ServerResponse) => boolean;
  /**
   * Asked when the target could not be woken (its thaw failed, activator.ts WAKE_FAILED): true means the caller has
   * taken the request over, as with `retry`.
   */
  wakeFailed?: (err: Error, res: ServerResponse) => boolean;
  /** Cuts the forwarding: an ApiError reason is the client's answer when no header has left yet (request-deadlines.ts). */
  cut?: Cut;
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
  const relay = new Relay(res, extra, unreachable, done);
  // A client gone before the answer ended must not leave the sandbox's request running.
  res.once('close', relay.onClientClose);
  if (extra.cut) extra.cut.onCut = relay.onCut;
  upstream.dispatch(
    {
      path,
      method: req.method as Dispatcher.HttpMethod,
      headers,
      body: hasBody(req) ? req : undefined,
    },
    relay,
  );
}

/**
 * Writes one upstream answer to the client as it arrives. A handler of undici's own dispatch interface rather
 * than `stream()`: that one costs an AbortController, an async resource and a stream-finished watcher per
 * request, a tenth of the gateway's CPU under load for nothing this relay needs.
 */
class Relay implements Dispatcher.DispatchHandler {
  private abort?: (err?: Error) => void;
  /** Why the request was aborted before undici connected it: given to undici once it does. */
  private reason?: Error;
  private resume?: () => void;
  private over = false;

  constructor(
    private readonly res: ServerResponse,
    private readonly extra: ForwardExtra,
    private readonly unreachable: (err: Error & { code?: string }) => ApiError,
    private readonly done: () => void,
  ) {}

  readonly onClientClose = () => {
    if (this.over || this.res.writableFinished) return;
    const err = new Error('the client closed the connection');
    if (this.abort) this.abort(err);
    else this.reason = err;
  };

  /** The caller cut the request (request-deadlines.ts): its ApiError reason is the answer if no header left yet. */
  readonly onCut = () => {
    if (this.over) return;
    const reason = this.extra.cut?.reason;
    const err = reason instanceof Error ? reason : new Error('the request was cut');
    if (this.abort) this.abort(err);
    else this.reason = err;
  };

  onConnect(abort: (err?: Error) => void) {
    if (this.reason) abort(this.reason);
    else this.abort = abort;
  }

  onHeaders(statusCode: number, raw: Buffer[], resume: () => void) {
    // 1xx interim answers (100 Continue, 103 Early Hints) are not relayed; the final one follows.
    if (statusCode < 200) return true;
    this.resume = resume;
    const h = downstreamHeaders(util.parseHeaders(raw) as IncomingHttpHeaders);
    const { extra, res } = this;
    extra.onResponse?.(statusCode, h);
    addResponseHeaders(h, extra.responseHeaders);
    withoutScopeWidening(h);
    if (extra.cookieScope !== undefined) {
      const scoped = scopeSetCookies(h['set-cookie'], extra.cookieScope);
      if (scoped) h['set-cookie'] = scoped;
      else delete h['set-cookie'];
    }
    res.writeHead(statusCode, h);
    // A body of unknown length is a stream (watch, logs, exec): its headers go out now, not with its first
    // chunk, so the client sees it open at once. Sized bodies leave with their headers in one write.
    if (h['content-length'] === undefined) res.flushHeaders();
    return true;
  }

  onData(chunk: Buffer) {
    if (this.res.write(chunk)) return true;
    // Undici stops reading the sandbox until the client has taken what was written.
    if (this.resume) this.res.once('drain', this.resume);
    return false;
  }

  onComplete() {
    this.res.end();
    this.finish();
  }

  onError(err: Error & { code?: string }) {
    const { res } = this;
    if (this.over) return;
    if (res.destroyed) {
      // The client went away; nothing to answer.
    } else if (!res.headersSent) {
      // `abort` is handed over just before undici writes the request: without it, no byte of it left.
      const sent = this.abort !== undefined;
      const own = err instanceof ApiError || this.reason !== undefined;
      if (own || sent || !this.extra.retry?.(err, res))
        sendProblem(
          res,
          err instanceof ApiError ? err : (this.extra.onUnreachable?.(err, sent) ?? this.unreachable(err)),
        );
    } else res.destroy();
    this.finish();
  }

  private finish() {
    if (this.over) return;
    this.over = true;
    this.res.removeListener('close', this.onClientClose);
    if (this.extra.cut?.onCut === this.onCut) this.extra.cut.onCut = undefined;
    this.done();
  }
}
