// Gateway failures on the wire: the same problem+json shape as /v0 (api/errors.ts), written on raw node:http
// objects because the gateway answers before Fastify ever sees the request.
import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { ApiError } from '../api/errors.js';

export function toApiError(err: unknown): ApiError {
  return err instanceof ApiError
    ? err
    : new ApiError('INTERNAL', 'internal error; the server log has the details');
}

export function sendProblem(res: ServerResponse, err: unknown, instance?: string): void {
  const e = toApiError(err);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(e.toProblem(instance));
  res.writeHead(e.status, {
    ...e.headers,
    'content-type': 'application/problem+json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** The same answer on a socket that asked for an upgrade (no ServerResponse exists there). */
export function rejectUpgrade(socket: Duplex, err: unknown, instance?: string): void {
  const e = toApiError(err);
  const body = JSON.stringify(e.toProblem(instance));
  const headers = Object.entries(e.headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.end(
    `HTTP/1.1 ${e.status} ${e.title}\r\nconnection: close\r\ncontent-type: application/problem+json\r\n${headers}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}
