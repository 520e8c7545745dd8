import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readBody } from './request-body.js';

const named = JSON.stringify({ model: 'o3-pro', messages: [] });

test('JSON behind a UTF-8 byte order mark is read, whatever its declared type', () => {
  const { json } = readBody(Buffer.from(`\ufeff${named}`), { 'content-type': 'text/plain' });
  assert.equal(json.model, 'o3-pro');
});

test('JSON in UTF-16 or UTF-32, with or without a byte order mark, is refused: the gateway would not read it', () => {
  const wide = [
    Buffer.from(`\ufeff${named}`, 'utf16le'),
    Buffer.from(named, 'utf16le'),
    Buffer.from(named, 'utf16le').swap16(),
    Buffer.concat([...named].map((c) => Buffer.from([0, 0, 0, c.charCodeAt(0)]))),
  ];
  for (const body of wide)
    for (const type of [undefined, 'application/json', 'text/plain'])
      assert.throws(
        () => readBody(body, type ? { 'content-type': type } : {}),
        (e: any) => e.name === 'UNSUPPORTED_MEDIA_TYPE' && e.status === 415,
      );
});

test('media and binary uploads pass as bytes, whatever they start with', () => {
  const mp4 = Buffer.from([0, 0, 0, 0x20, 0x66, 0x74, 0x79, 0x70, 0x69, 0x73, 0x6f, 0x6d]);
  assert.deepEqual(readBody(mp4, {}).json, undefined, 'an MP4 box header is no wide JSON');
  const utf16Text = Buffer.from(`\ufeff${named}`, 'utf16le');
  for (const type of ['audio/wav', 'application/octet-stream', 'multipart/form-data; boundary=x'])
    assert.equal(readBody(utf16Text, { 'content-type': type }).raw, utf16Text);
});
