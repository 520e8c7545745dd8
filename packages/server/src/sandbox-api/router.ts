// A tiny router over node:http: patterns of literal segments, `:param` (one decoded segment) and a final `*rest`
// (the raw, still percent-encoded remainder, because path parameters such as `%2Ftmp%2Fa.txt` carry meaning in
// their encoding). Routes match in registration order; failures render as `{"error": "..."}`.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { HttpError, sendError } from './http.js';

export interface RouteContext {
  req: IncomingMessage;
  res: ServerResponse;
  params: Record<string, string>;
  query: URLSearchParams;
}

export type Handler = (ctx: RouteContext) => Promise<void> | void;

export interface UpgradeContext {
  req: IncomingMessage;
  socket: Duplex;
  head: Buffer;
  params: Record<string, string>;
  query: URLSearchParams;
}

export type UpgradeHandler = (ctx: UpgradeContext) => Promise<void> | void;

interface Route<H> {
  method: string;
  segments: string[];
  handler: H;
}

type Match = { params: Record<string, string> } | null;

function compile(pattern: string): string[] {
  return pattern.split('/').slice(1);
}

function matchSegments(segments: string[], parts: string[]): Match {
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i];
    if (seg.startsWith('*')) {
      params[seg.slice(1)] = parts.slice(i).join('/');
      return { params };
    }
    const part = parts[i];
    if (part === undefined) return null;
    if (seg.startsWith(':')) {
      if (part === '') return null;
      try {
        params[seg.slice(1)] = decodeURIComponent(part);
      } catch {
        return null;
      }
    } else if (seg !== part) {
      return null;
    }
  }
  // A trailing slash is the same route (`/process/` is `/process`).
  const n = parts.length;
  return n === segments.length || (n === segments.length + 1 && parts[n - 1] === '') ? { params } : null;
}

export class Router {
  private routes: Route<Handler>[] = [];
  private upgrades: Route<UpgradeHandler>[] = [];

  on(method: string, pattern: string, handler: Handler): this {
    this.routes.push({ method, segments: compile(pattern), handler });
    return this;
  }

  upgrade(pattern: string, handler: UpgradeHandler): this {
    this.upgrades.push({ method: 'GET', segments: compile(pattern), handler });
    return this;
  }

  /** The request listener for http.createServer. */
  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    const { pathname, query } = splitUrl(req.url ?? '/');
    const parts = pathname.split('/').slice(1);
    let pathMatched = false;
    for (const route of this.routes) {
      const m = matchSegments(route.segments, parts);
      if (!m) continue;
      pathMatched = true;
      if (route.method !== '*' && route.method !== req.method) continue;
      run(route.handler, { req, res, params: m.params, query });
      return;
    }
    if (pathMatched) sendError(res, 405, `method ${req.method} not allowed on ${pathname}`);
    else sendError(res, 404, `no route for ${req.method} ${pathname}`);
  };

  /** The 'upgrade' listener; unknown paths get their socket closed with a 404. */
  readonly handleUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    const { pathname, query } = splitUrl(req.url ?? '/');
    const parts = pathname.split('/').slice(1);
    for (const route of this.upgrades) {
      const m = matchSegments(route.segments, parts);
      if (!m) continue;
      Promise.resolve()
        .then(() => route.handler({ req, socket, head, params: m.params, query }))
        .catch(() => socket.destroy());
      return;
    }
    socket.end('HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
  };
}

function splitUrl(url: string): { pathname: string; query: URLSearchParams } {
  const q = url.indexOf('?');
  return q < 0
    ? { pathname: url, query: new URLSearchParams() }
    : { pathname: url.slice(0, q), query: new URLSearchParams(url.slice(q + 1)) };
}

function run(handler: Handler, ctx: RouteContext): void {
  let p: Promise<void> | void;
  try {
    p = handler(ctx);
  } catch (err) {
    fail(ctx.res, err);
    return;
  }
  if (p) p.catch((err) => fail(ctx.res, err));
}

function fail(res: ServerResponse, err: unknown): void {
  if (err instanceof HttpError) {
    sendError(res, err.status, err.message);
    return;
  }
  // A bug, not bad input: say so on stderr and answer 500 without a stack trace.
  process.stderr.write(`sandbox-api: unexpected error: ${(err as Error)?.stack ?? String(err)}\n`);
  sendError(res, 500, (err as Error)?.message ?? 'internal error');
}
