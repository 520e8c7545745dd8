// WebSocket (and any other Upgrade) requests to a sandbox: the request head is re-written to the daemon's unix
// socket (or, for /port/{n}, to that port at the sandbox's address), then bytes are piped both ways until either
// side closes. The far end does the handshake itself, so the terminal and /port/{n} websockets work without
// the gateway knowing the protocol.
import type { IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import type { Duplex } from 'node:stream';
import { ApiError } from '../errors.js';
import { CREDENTIAL_HEADERS, PREVIEW_TOKEN_HEADERS, withoutTokenCookie } from './auth.js';
import { matchPort, portHost, portUnreachable } from './ports.js';
import { scopeResponseHead } from './preview-cookies.js';
import type { ForwardExtra } from './proxy.js';
import { rejectUpgrade } from '../http/problem.js';
import type { Target } from './targets.js';

const DROPPED = new Set<string>(['host', ...CREDENTIAL_HEADERS, ...PREVIEW_TOKEN_HEADERS]);

function requestHead(
  req: IncomingMessage,
  path: string,
  host: string,
  extra: Record<string, string> = {},
): string {
  let head = `${req.method} ${path} HTTP/1.1\r\nhost: ${host}\r\n`;
  const raw = req.rawHeaders;
  const overridden = new Set(Object.keys(extra).map((k) => k.toLowerCase()));
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    const lower = name.toLowerCase();
    const value = lower === 'cookie' ? withoutTokenCookie(raw[i + 1]) : raw[i + 1];
    if (DROPPED.has(lower) || overridden.has(lower) || !value || /[\r\n]/.test(value)) continue;
    head += `${name}: ${value}\r\n`;
  }
  for (const [name, value] of Object.entries(extra)) head += `${name}: ${value}\r\n`;
  if (req.headers.host) head += `x-forwarded-host: ${req.headers.host}\r\n`;
  return `${head}\r\n`;
}

/** Bytes of the far end's response head read for a preview (cookies are checked there); past it, the tunnel ends. */
const MAX_RESPONSE_HEAD = 64 * 1024;

/**
 * Pipes the far end's answer to the client; for a preview (`cookieScope` set), its response head first goes
 * through scopeResponseHead, since a handshake's Set-Cookie reaches the browser like any other.
 */
function pipeDown(up: Duplex, socket: Duplex, cookieScope: string | undefined, fail: () => void) {
  if (cookieScope === undefined) {
    up.pipe(socket);
    return;
  }
  let buf = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    const end = buf.indexOf('\r\n\r\n');
    if (end < 0) {
      if (buf.length > MAX_RESPONSE_HEAD) fail();
      return;
    }
    up.off('data', onData);
    up.pause();
    socket.write(scopeResponseHead(buf.subarray(0, end + 4).toString('latin1'), cookieScope), 'latin1');
    if (buf.length > end + 4) socket.write(buf.subarray(end + 4));
    up.pipe(socket);
  };
  up.on('data', onData);
}

/**
 * Tunnels the upgrade of `req` to the sandbox. `done` runs once when the tunnel is over; `open` holds the
 * client sockets still tunnelled, so a shutdown can end them.
 */
export function tunnel(
  t: Target,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  path: string,
  open: Set<Duplex>,
  done: () => void,
  extra: ForwardExtra = {},
): void {
  const port = matchPort(path);
  const up = port ? connect(port.port, t.conn.address) : connect(t.conn.socketPath);
  let connected = false;
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    open.delete(socket);
    up.destroy();
    socket.destroy();
    done();
  };
  open.add(socket);
  up.once('connect', () => {
    connected = true;
    up.setNoDelay(true);
    up.write(
      port
        ? requestHead(req, port.path, portHost(port.port), extra.requestHeaders)
        : requestHead(req, path, 'sandbox'),
    );
    if (head.length) up.write(head);
    pipeDown(up, socket, extra.cookieScope, () => finish());
    socket.pipe(up);
  });
  up.on('error', (err: Error & { code?: string }) => {
    if (!connected && !finished) {
      rejectUpgrade(
        socket,
        port
          ? portUnreachable(t, port.port, err)
          : new ApiError(
              'BAD_GATEWAY',
              `sandbox ${JSON.stringify(t.key.name)} is unreachable: ${err.code ?? err.message}`,
            ),
      );
      finished = true;
      open.delete(socket);
      done();
      return;
    }
    finish();
  });
  up.on('close', finish);
  socket.on('error', finish);
  socket.on('close', finish);
}
