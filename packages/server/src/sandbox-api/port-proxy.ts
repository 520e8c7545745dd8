// ANY /port/{n}/{path}: forwards the request to 127.0.0.1:n inside the sandbox, streaming both bodies; a WebSocket
// (or any Upgrade) is spliced through as raw bytes once the upstream connection is open.
import { type IncomingHttpHeaders, request } from 'node:http';
import { connect } from 'node:net';
import { badRequest, sendError } from './http.js';
import type { Handler, UpgradeHandler } from './router.js';

/** Headers that describe one hop, not the message (RFC 9110 §7.6.1); never forwarded. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);
/** Berth's own credentials: the code in the sandbox has no business seeing them. */
const BERTH_CREDENTIALS = new Set(['x-blaxel-authorization', 'x-service-authorization']);

export function proxyHttp(): Handler {
  return ({ req, res, params }) => {
    const port = portOf(params.port);
    const headers = forwardHeaders(req.headers, port, false);
    const upstream = request(
      { host: '127.0.0.1', port, method: req.method, path: targetPath(params.rest, req.url), headers },
      (up) => {
        const out: Record<string, string | string[]> = {};
        for (const [k, v] of Object.entries(up.headers))
          if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v;
        res.writeHead(up.statusCode ?? 502, up.statusMessage, out);
        up.pipe(res);
        up.on('error', () => res.destroy());
      },
    );
    upstream.on('error', (err) =>
      sendError(res, 502, `nothing answered on port ${port} in the sandbox: ${err.message}`),
    );
    res.once('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  };
}

export function proxyUpgrade(): UpgradeHandler {
  return ({ req, socket, head, params }) => {
    const port = portOf(params.port);
    const upstream = connect(port, '127.0.0.1');
    upstream.once('connect', () => {
      let lines = `${req.method} ${targetPath(params.rest, req.url)} HTTP/1.1\r\n`;
      for (const [k, v] of Object.entries(forwardHeaders(req.headers, port, true))) {
        for (const one of Array.isArray(v) ? v : [v]) lines += `${k}: ${one}\r\n`;
      }
      upstream.write(`${lines}\r\n`);
      if (head.length) upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on('error', () => {
      if (socket.writable)
        socket.end('HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
    });
    socket.on('error', () => upstream.destroy());
    socket.on('close', () => upstream.destroy());
    upstream.on('close', () => socket.destroy());
  };
}

function portOf(raw: string): number {
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw badRequest(`invalid port ${raw}`);
  return port;
}

/** The path after /port/{n}, raw as received, with the query string. */
function targetPath(rest: string, url: string | undefined): string {
  const q = url?.indexOf('?') ?? -1;
  return `/${rest}${q >= 0 ? url!.slice(q) : ''}`;
}

function forwardHeaders(
  h: IncomingHttpHeaders,
  port: number,
  upgrade: boolean,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined || BERTH_CREDENTIALS.has(k) || k === 'host') continue;
    if (HOP_BY_HOP.has(k) && !(upgrade && (k === 'connection' || k === 'upgrade'))) continue;
    out[k] = v;
  }
  // Dev servers (Vite, Next) only answer Hosts they know; localhost is always one of them.
  out.host = `localhost:${port}`;
  if (h.host) out['x-forwarded-host'] = h.host;
  return out;
}
