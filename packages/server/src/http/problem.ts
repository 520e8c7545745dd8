// Problems written on raw node:http objects: the gateway answers before Fastify ever sees the request, in the
// problem+json shape of /v0 with `error` holding the message, as data-plane clients read it (errors.ts).
import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { dataPlaneProblem } from '../errors.js';
import { wireErrorOf } from './wire-error.js';

export function sendProblem(res: ServerResponse, err: unknown, instance?: string): void {
  const e = wireErrorOf(err);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(dataPlaneProblem(e, instance));
  res.writeHead(e.status, {
    ...e.headers,
    'content-type': 'application/problem+json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** The same answer on a socket that asked for an upgrade (no ServerResponse exists there). */
export function rejectUpgrade(socket: Duplex, err: unknown, instance?: string): void {
  const e = wireErrorOf(err);
  const body = JSON.stringify(dataPlaneProblem(e, instance));
  const headers = Object.entries(e.headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.end(
    `HTTP/1.1 ${e.status} ${e.title}\r\nconnection: close\r\ncontent-type: application/problem+json\r\n${headers}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}
