// GET /filesystem/{path}: a directory's listing, a file as JSON with its content, or the file's raw bytes when the
// client asks for them (Accept: application/octet-stream, any Accept that is not JSON, or ?download=true).
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { basename } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { SandboxApi } from '../context.js';
import { badRequest, fsError, HttpError, sendJson } from '../http.js';
import { PathResolver } from '../paths.js';
import type { Handler } from '../router.js';
import type { FileWithContent } from '../schema.js';
import { fileEntry, listDirectory } from './entries.js';

/** Files larger than this are refused as JSON (their content would be copied three times in memory). */
export const MAX_JSON_FILE_BYTES = 64 * 1024 * 1024;

export function readPath(api: SandboxApi): Handler {
  return async ({ req, res, params, query }) => {
    const abs = await api.paths.resolve(PathResolver.decode(params.path));
    const st = await stat(abs).catch((err) => {
      throw fsError(err, abs);
    });
    if (st.isDirectory()) {
      sendJson(res, 200, await listDirectory(abs).catch((err) => Promise.reject(fsError(err, abs))));
      return;
    }
    if (wantsRaw(req, query)) {
      res.writeHead(200, {
        'content-type': 'application/octet-stream',
        'content-length': st.size,
        'content-disposition': `attachment; filename="${basename(abs).replace(/["\\\r\n]/g, '_')}"`,
      });
      await sendBytes(abs, st.size, res);
      return;
    }
    sendJson(res, 200, await readFileJson(abs));
  };
}

export async function readFileJson(abs: string): Promise<FileWithContent> {
  try {
    const st = await stat(abs);
    if (st.isDirectory()) throw badRequest(`${abs} is a directory`);
    if (st.size > MAX_JSON_FILE_BYTES)
      throw new HttpError(
        413,
        `${abs} is larger than ${MAX_JSON_FILE_BYTES} bytes: download it raw (Accept: application/octet-stream)`,
      );
    const content = await readFile(abs, 'utf8');
    return { ...fileEntry(abs, st), content };
  } catch (err) {
    throw fsError(err, abs);
  }
}

/**
 * Exactly the `size` bytes the Content-Length announced. A file another process appends to while it is read (a log,
 * a record file) would otherwise send more, and the surplus would be read as the next answer on that kept-alive
 * connection; one that shrank meanwhile would leave the client waiting: its connection is cut instead.
 */
async function sendBytes(abs: string, size: number, res: ServerResponse) {
  if (size === 0) {
    res.end();
    return;
  }
  let sent = 0;
  const file = createReadStream(abs, { end: size - 1 }).on('data', (chunk) => {
    sent += chunk.length;
  });
  const whole = await pipeline(file, res, { end: false }).then(
    () => sent === size,
    () => false,
  );
  if (whole) res.end();
  else res.destroy();
}

/** The service's daemon rule: octet-stream asked for, or an Accept naming neither JSON nor anything. */
function wantsRaw(req: IncomingMessage, query: URLSearchParams): boolean {
  if (query.get('download') === 'true') return true;
  const accept = req.headers.accept ?? '';
  if (accept === '') return false;
  if (accept.includes('application/octet-stream')) return true;
  return !accept.includes('application/json') && !accept.includes('*/*');
}
