import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { HttpError } from '../http.js';
import { readForm } from './form-data.js';

let server: Server;
let port: number;
before(async () => {
  // Parses each request's form and answers what it read: file parts as hex, fields as given.
  server = createServer(async (req, res) => {
    try {
      const files: Record<string, Buffer[]> = {};
      const form = await readForm(req, (part) => {
        const sink = new PassThrough();
        files[part.field] = [];
        sink.on('data', (c: Buffer) => files[part.field].push(c));
        return sink;
      });
      const out = Object.fromEntries(
        Object.entries(files).map(([k, v]) => [k, Buffer.concat(v).toString('hex')]),
      );
      res.end(JSON.stringify({ fields: form.fields, files: out, sizes: form.files.map((f) => f.size) }));
    } catch (err) {
      res.statusCode = err instanceof HttpError ? err.status : 500;
      res.end(String((err as Error).message));
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
after(() => new Promise((r) => server.close(r)));

/** Sends `body` in pieces of `size` bytes, so delimiters land across chunk boundaries. */
function send(body: Buffer, contentType: string, size: number): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, method: 'PUT', headers: { 'content-type': contentType } },
      (res) => {
        let text = '';
        res.on('data', (c) => {
          text += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    (async () => {
      for (let i = 0; i < body.length; i += size) {
        req.write(body.subarray(i, i + size));
        await new Promise((r) => setImmediate(r));
      }
      req.end();
    })();
  });
}

function multipart(boundary: string, parts: { name: string; filename?: string; data: Buffer }[]): Buffer {
  const chunks: Buffer[] = [Buffer.from('preamble to ignore\r\n')];
  for (const p of parts) {
    const disp = `form-data; name="${p.name}"${p.filename !== undefined ? `; filename="${p.filename}"` : ''}`;
    chunks.push(
      Buffer.from(`--${boundary}\r\nContent-Disposition: ${disp}\r\n\r\n`),
      p.data,
      Buffer.from('\r\n'),
    );
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}

describe('multipart/form-data reader', () => {
  const boundary = '----berthBoundary7MA4YWxkTrZu0gW';
  // Bytes that look like a delimiter's start, inside the file, must stay file bytes.
  const tricky = Buffer.concat([
    randomBytes(1000),
    Buffer.from(`\r\n--${boundary.slice(0, 10)}`),
    randomBytes(1000),
  ]);
  const body = multipart(boundary, [
    { name: 'file', filename: 'a.bin', data: tricky },
    { name: 'permissions', data: Buffer.from('0644') },
    { name: 'path', data: Buffer.from('/tmp/a.bin') },
  ]);

  for (const size of [1, 7, 64, 100_000]) {
    test(`parts and fields come out whole when the body arrives in ${size}-byte chunks`, async () => {
      const res = await send(body, `multipart/form-data; boundary=${boundary}`, size);
      assert.equal(res.status, 200, res.text);
      const got = JSON.parse(res.text);
      assert.equal(got.files.file, tricky.toString('hex'));
      assert.deepEqual(got.fields, { permissions: '0644', path: '/tmp/a.bin' });
      assert.deepEqual(got.sizes, [tricky.length]);
    });
  }

  test('a quoted boundary is understood', async () => {
    const res = await send(body, `multipart/form-data; boundary="${boundary}"`, 1000);
    assert.equal(res.status, 200, res.text);
  });

  test('a body cut before its closing boundary is a 400', async () => {
    const res = await send(
      body.subarray(0, body.length - 30),
      `multipart/form-data; boundary=${boundary}`,
      1000,
    );
    assert.equal(res.status, 400);
    assert.match(res.text, /closing boundary/);
  });

  test('a body that is not multipart is a 400', async () => {
    const res = await send(Buffer.from('{}'), 'application/json', 10);
    assert.equal(res.status, 400);
  });
});
