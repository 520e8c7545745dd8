// Small helpers over node:http for the daemon's handlers: JSON answers, `{"error"}` failures, bounded bodies.
import type { IncomingMessage, ServerResponse } from 'node:http';

/** Largest JSON body accepted (a file PUT as JSON carries its content; the SDK switches to multipart above 5 MB). */
export const JSON_BODY_LIMIT = 64 * 1024 * 1024;

/** A failure a handler throws; the router renders it as `{"error": message}` with `status`. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export const badRequest = (msg: string) => new HttpError(400, msg);
export const forbidden = (msg: string) => new HttpError(403, msg);
export const notFound = (msg: string) => new HttpError(404, msg);
export const conflict = (msg: string) => new HttpError(409, msg);
export const unprocessable = (msg: string) => new HttpError(422, msg);

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

export function sendError(res: ServerResponse, status: number, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  // A body left unread (too large, or refused before it was read) is not drained for keep-alive: the answer
  // closes the connection, so a client still sending learns of it at once instead of after its last byte.
  if (res.req && !res.req.complete) res.setHeader('connection', 'close');
  sendJson(res, status, { error: message });
}

/** Maps a filesystem error to the status the service's daemon answers with. */
export function fsError(err: unknown, what: string): HttpError {
  if (err instanceof HttpError) return err;
  const code = (err as NodeJS.ErrnoException)?.code;
  const detail = (err as Error)?.message ?? String(err);
  if (code === 'ENOENT') return notFound(`${what}: no such file or directory`);
  if (code === 'EACCES' || code === 'EPERM') return forbidden(`${what}: permission denied`);
  if (code === 'ENOTEMPTY') return unprocessable(`${what}: directory not empty (use recursive=true)`);
  if (code === 'EISDIR') return badRequest(`${what}: is a directory`);
  if (code === 'ENOTDIR') return badRequest(`${what}: not a directory`);
  if (code === 'EEXIST') return conflict(`${what}: already exists`);
  return unprocessable(`${what}: ${detail}`);
}

/**
 * The whole body, up to `limit` bytes. A declared length past the limit is refused before a byte is read; a
 * chunked body, as soon as it passes it. Either way the rest is left unread (not destroyed, so the 413 still
 * reaches the client) and sendError closes the connection.
 */
export function readBody(req: IncomingMessage, limit = JSON_BODY_LIMIT): Promise<Buffer> {
  const tooLarge = () => new HttpError(413, `request body larger than ${limit} bytes`);
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) chunks.push(chunk);
      else {
        stop();
        chunks.length = 0;
        reject(tooLarge());
      }
    };
    const onEnd = () => {
      stop();
      resolve(Buffer.concat(chunks));
    };
    const onError = (err: Error) => {
      stop();
      reject(err);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}

/** Reads a JSON body; an empty body is `{}` (the SDK omits optional bodies). */
export async function readJson(req: IncomingMessage): Promise<unknown> {
  const raw = await readBody(req);
  if (raw.length === 0) return {};
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    throw badRequest('body is not valid JSON');
  }
}

export function queryBool(q: URLSearchParams, name: string, fallback: boolean): boolean {
  const v = q.get(name);
  if (v === null || v === '') return fallback;
  return v === 'true' || v === '1';
}

/** A positive integer query value, clamped to `max`; anything unparsable falls back. */
export function queryInt(q: URLSearchParams, name: string, fallback: number, max: number): number {
  const v = Number.parseInt(q.get(name) ?? '', 10);
  if (!Number.isFinite(v) || v < 0) return fallback;
  return Math.min(v, max);
}

/** Comma-separated list query value, trimmed, empties dropped; null when absent. */
export function queryList(q: URLSearchParams, name: string): string[] | null {
  const v = q.get(name);
  if (v === null) return null;
  return v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Headers for a body streamed as it is produced: no buffering by proxies, no caching. */
export function streamHeaders(contentType: string): Record<string, string> {
  return {
    'content-type': contentType,
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
  };
}
