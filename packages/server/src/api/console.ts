// The web console (packages/console, docs/decisions/045-web-console.md) served at /console from its built files.
// The files are read once at start into a table, so a request can only ever name one of them (no path reaches the
// disk). Hashed assets are cached for a year; the page itself is revalidated, and carries a Content-Security-Policy
// that allows only the console's own scripts and styles and requests to its own origin: no inline script, no
// framing, no plugin, nothing loaded from elsewhere. The console signs in with an API key kept in the tab's
// sessionStorage and sent as Authorization, so no cookie carries a credential and a forged request has none.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../errors.js';

export const CONSOLE_PATH = '/console';
export const DEFAULT_CONSOLE_DIR = fileURLToPath(new URL('../../../console/dist/', import.meta.url));

/** `connect-src 'self'` covers the same host's ws: (the terminal) in CSP Level 3, as Chromium and Firefox do. */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "frame-src 'none'",
  "worker-src 'none'",
  "object-src 'none'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

const SECURITY_HEADERS = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

/** Hashed file names never change content: a year, immutable. */
const ASSET_CACHE = 'public, max-age=31536000, immutable';
/** The page names the current hashes: always revalidated. */
const PAGE_CACHE = 'no-cache';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
  '.webmanifest': 'application/manifest+json',
  '.txt': 'text/plain; charset=utf-8',
};
const COMPRESSIBLE = new Set(['.html', '.js', '.css', '.svg', '.json', '.webmanifest', '.txt']);

interface File {
  type: string;
  body: Buffer;
  br?: Buffer;
  gzip?: Buffer;
  etag: string;
  cache: string;
}

function walk(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) walk(p, out);
    else out.push(p);
  }
  return out;
}

/** Every built file by its URL path under /console, compressed once here rather than per request. */
export function loadConsoleFiles(dir: string): Map<string, File> {
  const files = new Map<string, File>();
  if (!existsSync(join(dir, 'index.html'))) return files;
  for (const p of walk(dir)) {
    const rel = relative(dir, p).split(sep).join('/');
    const ext = extname(p);
    const body = readFileSync(p);
    const file: File = {
      type: TYPES[ext] ?? 'application/octet-stream',
      body,
      etag: `"${body.length.toString(36)}-${hash(body)}"`,
      cache: rel.startsWith('assets/') ? ASSET_CACHE : PAGE_CACHE,
    };
    if (COMPRESSIBLE.has(ext) && body.length > 1024) {
      file.br = brotliCompressSync(body, { params: { [constants.BROTLI_PARAM_QUALITY]: 9 } });
      file.gzip = gzipSync(body, { level: 9 });
    }
    files.set(`/${rel}`, file);
  }
  return files;
}

function hash(b: Buffer): string {
  let h = 2166136261;
  for (let i = 0; i < b.length; i++) h = Math.imul(h ^ b[i], 16777619);
  return (h >>> 0).toString(36);
}

function send(req: FastifyRequest, reply: FastifyReply, f: File) {
  reply.headers({ ...SECURITY_HEADERS, 'cache-control': f.cache, etag: f.etag, vary: 'accept-encoding' });
  reply.type(f.type);
  if (req.headers['if-none-match'] === f.etag) return reply.code(304).send();
  const accept = String(req.headers['accept-encoding'] ?? '');
  if (f.br && /\bbr\b/.test(accept)) return reply.header('content-encoding', 'br').send(f.br);
  if (f.gzip && /\bgzip\b/.test(accept)) return reply.header('content-encoding', 'gzip').send(f.gzip);
  return reply.send(f.body);
}

export function registerConsole(app: FastifyInstance, opts: { dir?: string } = {}) {
  const files = loadConsoleFiles(opts.dir ?? DEFAULT_CONSOLE_DIR);
  const page = files.get('/index.html');
  const serve = async (req: FastifyRequest, reply: FastifyReply) => {
    if (!page)
      throw new ApiError(
        'NOT_FOUND',
        'the console is not built: run `npm run build` (scripts/install.sh does) and start the server again',
      );
    const path = req.url.split('?')[0].slice(CONSOLE_PATH.length) || '/';
    const f = files.get(path);
    if (f) return send(req, reply, f);
    // A missing asset is a 404 (a stale page asking for an old hash); any other path is a page of the app.
    if (path.startsWith('/assets/')) throw new ApiError('NOT_FOUND', `no console file ${path}`);
    return send(req, reply, page);
  };
  // The router ignores a trailing slash: `/console` and `/console/` reach the same route, told apart here.
  app.get(CONSOLE_PATH, async (req, reply) =>
    req.url.split('?')[0] === CONSOLE_PATH ? reply.redirect(`${CONSOLE_PATH}/`, 301) : serve(req, reply),
  );
  app.get(`${CONSOLE_PATH}/*`, serve);
}
