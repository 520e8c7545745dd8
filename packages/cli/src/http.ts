// One request with an answer read whole, over node:http(s). The management calls of every command go through here,
// not through fetch: Node 20 compiles fetch's HTTP client (undici and its parser) when it is first used, a tenth of
// a second of every short command (measured with `bench/cli/start.mjs`). Streams (logs, watches, uploads) keep fetch.
import type { IncomingHttpHeaders } from 'node:http';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { Readable } from 'node:stream';

export interface HeaderMap {
  get(name: string): string | null;
}

export interface RawAnswer {
  status: number;
  headers: HeaderMap;
  text: string;
}

const headerMap = (h: IncomingHttpHeaders): HeaderMap => ({
  get: (name) => {
    const v = h[name.toLowerCase()];
    return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
  },
});

export function send(
  url: URL,
  method: string,
  headers: Record<string, string>,
  body?: string | Blob,
): Promise<RawAnswer> {
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: headerMap(res.headers),
          text: Buffer.concat(chunks).toString('utf8'),
        }),
      );
    });
    req.on('error', reject);
    if (body === undefined) req.end();
    else if (typeof body === 'string') req.end(body);
    else Readable.fromWeb(body.stream() as import('node:stream/web').ReadableStream).pipe(req);
  });
}
