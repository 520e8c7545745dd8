// A model call's request body as the gateway judges it: decoded from any content coding, and parsed as JSON
// whenever it is JSON, whatever Content-Type the caller declared (a provider reads a JSON body sent as
// text/plain or form-encoded, so the gateway must read and judge it too).
import type { IncomingHttpHeaders } from 'node:http';
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import { ApiError } from '../errors.js';
import { nestsDeeperThan } from '../http/json-depth.js';

/**
 * Deepest nesting of an inference body: tool parameters are JSON Schemas, which nest deeper than Berth's own
 * management bodies (MAX_JSON_DEPTH), yet far below what would overflow the stack of the metering walk.
 */
export const MAX_INFERENCE_JSON_DEPTH = 256;

/** Inference bodies carry images and long contexts: far above the 1 MiB of management calls. */
export const MAX_INFERENCE_BODY = 32 * 1024 * 1024;

/** Content codings a request body may arrive in; decoded so what is forwarded is what was judged. */
const DECODE: Record<string, (b: Buffer, o: { maxOutputLength: number }) => Buffer> = {
  gzip: gunzipSync,
  'x-gzip': gunzipSync,
  deflate: inflateSync,
  br: brotliDecompressSync,
};

/** The body as bytes without any content coding (a gzipped body must not slip past a budget unread). */
function decodedBody(body: unknown, headers: IncomingHttpHeaders): Buffer | undefined {
  const raw = Buffer.isBuffer(body) && body.length ? body : undefined;
  const coding = String(headers['content-encoding'] ?? 'identity')
    .trim()
    .toLowerCase();
  if (!raw || coding === 'identity' || coding === '') return raw;
  const decode = DECODE[coding];
  if (!decode) throw new ApiError('UNSUPPORTED_MEDIA_TYPE', `content-encoding ${coding} is not supported`);
  try {
    return decode(raw, { maxOutputLength: MAX_INFERENCE_BODY });
  } catch (e) {
    throw new ApiError('MALFORMED_REQUEST', `body is not valid ${coding}: ${(e as Error).message}`);
  }
}

/** Whether bytes start like a JSON document, whatever Content-Type the caller declared. */
function looksJson(b: Buffer): boolean {
  for (const c of b) {
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) continue;
    return c === 0x7b || c === 0x5b; // { or [
  }
  return false;
}

/** The body's bytes (decoded) and, when it is JSON, its parsed value. */
export function readBody(body: unknown, headers: IncomingHttpHeaders): { raw?: Buffer; json?: any } {
  const raw = decodedBody(body, headers);
  if (!raw) return {};
  if (!/json/i.test(String(headers['content-type'] ?? '')) && !looksJson(raw)) return { raw };
  const text = raw.toString('utf8');
  // Metering walks the parsed body recursively: a body nested thousands deep would overflow the stack there.
  if (nestsDeeperThan(text, MAX_INFERENCE_JSON_DEPTH))
    throw new ApiError(
      'MALFORMED_REQUEST',
      `body nests deeper than ${MAX_INFERENCE_JSON_DEPTH} levels of arrays and objects`,
    );
  try {
    return { raw, json: JSON.parse(text) };
  } catch (e) {
    throw new ApiError('MALFORMED_REQUEST', `body is not valid JSON: ${(e as Error).message}`);
  }
}
