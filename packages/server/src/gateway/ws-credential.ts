// A browser cannot set headers on a WebSocket, so the console's terminal offers its credential as one of the
// subprotocols, `base64url.bearer.berth.<the key, base64url>`, the way Kubernetes' API server takes a bearer token
// from a browser. It is moved into Authorization before the request is resolved (then dropped, as Authorization
// always is, before the request reaches the sandbox) and removed from the protocols the sandbox is offered, so the
// sandbox never sees it. Never a URL: query strings end up in logs and history.
import type { IncomingMessage } from 'node:http';

export const WS_BEARER_PROTOCOL_PREFIX = 'base64url.bearer.berth.';

export function liftWsCredential(req: IncomingMessage): void {
  const offered = req.headers['sec-websocket-protocol'];
  if (typeof offered !== 'string' || !offered.includes(WS_BEARER_PROTOCOL_PREFIX)) return;
  const protocols = offered.split(',').map((p) => p.trim());
  const bearer = protocols.find((p) => p.startsWith(WS_BEARER_PROTOCOL_PREFIX));
  const rest = protocols.filter((p) => p && !p.startsWith(WS_BEARER_PROTOCOL_PREFIX));
  if (bearer && !req.headers.authorization) {
    const key = Buffer.from(bearer.slice(WS_BEARER_PROTOCOL_PREFIX.length), 'base64url').toString('utf8');
    if (key && !/[\r\n]/.test(key)) req.headers.authorization = `Bearer ${key}`;
  }
  if (rest.length) req.headers['sec-websocket-protocol'] = rest.join(', ');
  else delete req.headers['sec-websocket-protocol'];
  // The tunnel writes the head from rawHeaders: the credential leaves those too.
  const raw: string[] = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    if (req.rawHeaders[i].toLowerCase() !== 'sec-websocket-protocol')
      raw.push(req.rawHeaders[i], req.rawHeaders[i + 1]);
  }
  if (rest.length) raw.push('Sec-WebSocket-Protocol', rest.join(', '));
  req.rawHeaders.splice(0, req.rawHeaders.length, ...raw);
}
