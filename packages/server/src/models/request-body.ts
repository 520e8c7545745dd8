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

/** UTF-8's byte order mark, which some writers put before a JSON document (and Python's readers skip). */
const UTF8_BOM = Buffer.from([0xef, 0xbb, 0xbf]);

/** Whether bytes start like a JSON document, whatever Content-Type the caller declared. */
function looksJson(b: Buffer): boolean {
  for (const c of b.subarray(startsWithBom(b) ? 3 : 0)) {
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) continue;
    return c === 0x7b || c === 0x5b; // { or [
  }
  return false;
}

const startsWithBom = (b: Buffer) => b[0] === UTF8_BOM[0] && b[1] === UTF8_BOM[1] && b[2] === UTF8_BOM[2];

/** Declared types of bytes no provider reads as JSON. */
const BINARY_TYPE = /^\s*(application\/octet-stream|audio\/|image\/|video\/|multipart\/)/i;

/** A JSON document's first character: `{`, `[`, or whitespace. */
const opens = (c: number | undefined) =>
  c === 0x7b || c === 0x5b || c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/**
 * Whether bytes are JSON in UTF-16 or UTF-32: a wide byte order mark, or RFC 4627's pattern of NULs around
 * the first characters. Python servers read such a body as JSON; the gateway would not judge it.
 */
function looksWideJson(b: Buffer): boolean {
  if ((b[0] === 0xfe && b[1] === 0xff) || (b[0] === 0xff && b[1] === 0xfe)) return true;
  // Compared in place: a subarray per check cost more than the rest of the test, on every model call.
  const z = (from: number, to: number) => {
    if (b.length < to) return false;
    for (let i = from; i < to; i++) if (b[i] !== 0) return false;
    return true;
  };
  return (
    (z(0, 3) && opens(b[3]) && z(4, 7)) || // UTF-32BE
    (opens(b[0]) && z(1, 4) && z(5, 8)) || // UTF-32LE
    (b[0] === 0 && opens(b[1]) && b[2] === 0 && b.length >= 4) || // UTF-16BE
    (opens(b[0]) && b[1] === 0 && b[3] === 0 && b.length >= 4) // UTF-16LE
  );
}

/** The body's bytes (decoded) and, when it is JSON, its parsed value. */
export function readBody(body: unknown, headers: IncomingHttpHeaders): { raw?: Buffer; json?: any } {
  const raw = decodedBody(body, headers);
  if (!raw) return {};
  // Judged as it would be read: a body the gateway cannot read must not reach a provider that can. Media and
  // multipart uploads are bytes of their own, which may start with anything.
  if (!BINARY_TYPE.test(String(headers['content-type'] ?? '')) && looksWideJson(raw))
    throw new ApiError(
      'UNSUPPORTED_MEDIA_TYPE',
      'a JSON body must be UTF-8 (RFC 8259), not UTF-16 or UTF-32',
    );
  if (!/json/i.test(String(headers['content-type'] ?? '')) && !looksJson(raw)) return { raw };
  const text = raw.toString('utf8', startsWithBom(raw) ? 3 : 0);
  // Metering walks the parsed body recursively: a body nested thousands deep would overflow the stack there.
  // Each level takes a bracket, so a text no longer than the limit cannot pass it (most calls: no scan).
  if (text.length > MAX_INFERENCE_JSON_DEPTH && nestsDeeperThan(text, MAX_INFERENCE_JSON_DEPTH))
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
