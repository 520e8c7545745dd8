// A streaming multipart/form-data reader (RFC 7578): file parts go straight to a sink (a file on disk) with
// backpressure, so an upload never sits whole in memory; plain fields are collected as strings.
import type { IncomingMessage } from 'node:http';
import type { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { badRequest } from '../http.js';

/** A header block larger than this is not a form part header. */
const MAX_HEADER_BYTES = 16 * 1024;
/** Plain (non-file) fields are small: permissions, a path. */
const MAX_FIELD_BYTES = 1024 * 1024;

export interface PartInfo {
  field: string;
  filename: string;
  contentType: string;
}

export interface FormFile extends PartInfo {
  size: number;
}

/** Where a file part's bytes go; null discards the part. Called once per file part, in order. */
export type FileSink = (part: PartInfo) => Promise<Writable | null> | Writable | null;

export interface FormResult {
  fields: Record<string, string>;
  files: FormFile[];
}

export function boundaryOf(contentType: string | undefined): string | null {
  if (!contentType || !/^multipart\/form-data/i.test(contentType)) return null;
  const m = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  return m ? (m[1] ?? m[2]) : null;
}

export async function readForm(req: IncomingMessage, sink: FileSink): Promise<FormResult> {
  const boundary = boundaryOf(req.headers['content-type']);
  if (!boundary) throw badRequest('expected a multipart/form-data body with a boundary');
  // Every delimiter, the first included once we prepend CRLF, is CRLF "--" boundary.
  const delim = Buffer.from(`\r\n--${boundary}`);
  const result: FormResult = { fields: {}, files: [] };
  let buf: Buffer = Buffer.from('\r\n');
  let state: 'preamble' | 'after' | 'headers' | 'body' | 'done' = 'preamble';
  let current: { info: PartInfo; out: Writable | null; field: Buffer[]; size: number } | null = null;

  const emit = async (data: Buffer) => {
    if (!current || data.length === 0) return;
    current.size += data.length;
    if (current.out) {
      if (!current.out.write(data)) await waitDrain(current.out);
    } else if (!current.info.filename && current.field) {
      if (current.size > MAX_FIELD_BYTES) throw badRequest(`form field ${current.info.field} is too large`);
      current.field.push(data);
    }
  };

  const endPart = async () => {
    if (!current) return;
    const c = current;
    current = null;
    if (c.info.filename || c.out) {
      if (c.out) {
        c.out.end();
        await finished(c.out);
      }
      result.files.push({ ...c.info, size: c.size });
    } else {
      result.fields[c.info.field] = Buffer.concat(c.field).toString('utf8');
    }
  };

  /** A failed or truncated upload leaves no half-written sink open. */
  const discard = () => current?.out?.destroy();

  try {
    for await (const chunk of req) {
      buf = buf.length ? Buffer.concat([buf, chunk as Buffer]) : (chunk as Buffer);
      for (;;) {
        if (state === 'done') break;
        if (state === 'preamble' || state === 'body') {
          const at = buf.indexOf(delim);
          if (at < 0) {
            // Keep what could be the start of a delimiter split across chunks.
            const keep = Math.min(buf.length, delim.length - 1);
            if (state === 'body') await emit(buf.subarray(0, buf.length - keep));
            buf = buf.subarray(buf.length - keep);
            break;
          }
          if (state === 'body') {
            await emit(buf.subarray(0, at));
            await endPart();
          }
          buf = buf.subarray(at + delim.length);
          state = 'after';
        }
        if (state === 'after') {
          let i = 0;
          while (i < buf.length && (buf[i] === 0x20 || buf[i] === 0x09)) i++;
          if (buf.length - i < 2) break;
          if (buf[i] === 0x2d && buf[i + 1] === 0x2d) {
            state = 'done';
            break;
          }
          if (buf[i] !== 0x0d || buf[i + 1] !== 0x0a) throw badRequest('malformed multipart body');
          buf = buf.subarray(i + 2);
          state = 'headers';
        }
        if (state === 'headers') {
          const end = buf.indexOf('\r\n\r\n');
          if (end < 0) {
            if (buf.length > MAX_HEADER_BYTES) throw badRequest('multipart part headers too large');
            break;
          }
          const info = parseHeaders(buf.subarray(0, end).toString('utf8'));
          buf = buf.subarray(end + 4);
          const isFile = info.filename !== '';
          current = { info, out: isFile ? await sink(info) : null, field: [], size: 0 };
          state = 'body';
        }
      }
    }
  } catch (err) {
    discard();
    throw err;
  }
  if (state !== 'done') {
    discard();
    throw badRequest('multipart body ended before its closing boundary');
  }
  return result;
}

function parseHeaders(block: string): PartInfo {
  let field = '';
  let filename = '';
  let contentType = 'application/octet-stream';
  for (const line of block.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === 'content-disposition') {
      field = param(value, 'name') ?? '';
      filename = param(value, 'filename') ?? '';
    } else if (name === 'content-type') {
      contentType = value;
    }
  }
  if (!field) throw badRequest('multipart part without a field name');
  return { field, filename, contentType };
}

function param(header: string, key: string): string | undefined {
  const m =
    new RegExp(`(?:^|;)\\s*${key}="((?:[^"\\\\]|\\\\.)*)"`, 'i').exec(header) ??
    new RegExp(`(?:^|;)\\s*${key}=([^;\\s]*)`, 'i').exec(header);
  return m ? m[1].replace(/\\(.)/g, '$1') : undefined;
}

function waitDrain(out: Writable): Promise<void> {
  return new Promise((resolve, reject) => {
    const onDrain = () => {
      out.off('error', onError);
      resolve();
    };
    const onError = (err: Error) => {
      out.off('drain', onDrain);
      reject(err);
    };
    out.once('drain', onDrain);
    out.once('error', onError);
  });
}
