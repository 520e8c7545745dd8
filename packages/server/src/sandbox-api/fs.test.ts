import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { Agent, get as httpGet, type IncomingMessage } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { enc, startSandboxDaemon, type TestDaemon } from '../test-support/sandbox-daemon.js';
import type {
  ContentSearchResponse,
  DirectoryJson,
  FileWithContent,
  FindResponse,
  FuzzySearchResponse,
} from './schema.js';

let d: TestDaemon;
before(async () => {
  d = await startSandboxDaemon();
});
after(() => d.close());

const put = (path: string, json: unknown) => d.fetch(`/filesystem/${path}`, { method: 'PUT', json });

describe('files', () => {
  test('PUT JSON writes a file (parents made) and GET reads it back as JSON', async () => {
    const abs = `${d.root}/notes/a.txt`;
    const res = await put(enc(abs), { content: 'hello\n' });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { message: 'File created/updated successfully', path: abs });
    const file = (await (await d.fetch(`/filesystem/${enc(abs)}`)).json()) as FileWithContent;
    assert.equal(file.content, 'hello\n');
    assert.equal(file.name, 'a.txt');
    assert.equal(file.path, abs);
    assert.equal(file.size, 6);
    assert.equal(file.permissions, '644');
    assert.ok(file.owner && file.group && file.lastModified);
  });

  test('a raw read of a file appended meanwhile sends the length it announced; the connection serves the next answer', async () => {
    const abs = `${d.root}/growing.log`;
    const size = 32 * 1024 * 1024;
    writeFileSync(abs, Buffer.alloc(size, 'a'));
    // One kept-alive connection, so that bytes past the first answer would be read as the second one's.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const get = () =>
      new Promise<IncomingMessage>((resolve, reject) =>
        httpGet(
          `${d.url}/filesystem/${enc(abs)}`,
          { agent, headers: { accept: 'application/octet-stream' } },
          resolve,
        ).on('error', reject),
      );
    try {
      const first = await get();
      assert.equal(first.headers['content-length'], String(size));
      // Unread, the answer waits on the socket's buffers (far less than 32 MB): the rest is read after the append.
      appendFileSync(abs, Buffer.alloc(1024 * 1024, 'b'));
      let got = 0;
      let foreign = 0;
      for await (const chunk of first as AsyncIterable<Buffer>) {
        got += chunk.length;
        foreign += chunk.filter((b) => b !== 0x61).length;
      }
      assert.deepEqual([got, foreign], [size, 0]);
      const second = await get();
      assert.equal(second.statusCode, 200);
      assert.equal(second.headers['content-length'], String(size + 1024 * 1024));
      second.resume();
    } finally {
      agent.destroy();
    }
  });

  test('a relative path is relative to the working directory, ~ is $HOME', async () => {
    assert.equal((await put('rel.txt', { content: 'r' })).status, 200);
    assert.equal(readFileSync(`${d.root}/rel.txt`, 'utf8'), 'r');
    const file = (await (await d.fetch(`/filesystem/${enc('~/rel.txt')}`)).json()) as FileWithContent;
    assert.equal(file.content, 'r');
  });

  test('raw bytes come back with Accept: application/octet-stream or ?download=true', async () => {
    const bytes = randomBytes(3000);
    const form = new FormData();
    form.append('file', new Blob([bytes]), 'blob.bin');
    form.append('permissions', '0600');
    const res = await d.fetch(`/filesystem/${enc(`${d.root}/bin/blob.bin`)}`, { method: 'PUT', body: form });
    assert.equal(res.status, 200, await res.clone().text());
    assert.equal(statSync(`${d.root}/bin/blob.bin`).mode & 0o777, 0o600);
    const raw = await d.fetch(`/filesystem/bin%2Fblob.bin`, {
      headers: { accept: 'application/octet-stream' },
    });
    assert.equal(raw.headers.get('content-type'), 'application/octet-stream');
    assert.deepEqual(Buffer.from(await raw.arrayBuffer()), bytes);
    const dl = await d.fetch(`/filesystem/bin%2Fblob.bin?download=true`);
    assert.deepEqual(Buffer.from(await dl.arrayBuffer()), bytes);
  });

  test('a multipart PUT without a file field is a 400', async () => {
    const form = new FormData();
    form.append('permissions', '0644');
    const res = await d.fetch('/filesystem/nofile.bin', { method: 'PUT', body: form });
    assert.equal(res.status, 400);
  });

  test('a directory lists its files and subdirectories', async () => {
    await put('ls/x.txt', { content: 'x' });
    await put('ls/sub', { isDirectory: true, permissions: '0750' });
    const dir = (await (await d.fetch('/filesystem/ls')).json()) as DirectoryJson;
    assert.equal(dir.path, `${d.root}/ls`);
    assert.deepEqual(
      dir.files.map((f) => f.name),
      ['x.txt'],
    );
    assert.deepEqual(dir.subdirectories, [{ name: 'sub', path: `${d.root}/ls/sub` }]);
    assert.equal(statSync(`${d.root}/ls/sub`).mode & 0o777, 0o750);
  });

  test('DELETE removes a file; a non-empty directory needs recursive=true', async () => {
    await put('rm/a.txt', { content: 'a' });
    assert.equal((await d.fetch('/filesystem/rm%2Fa.txt', { method: 'DELETE' })).status, 200);
    assert.equal(existsSync(`${d.root}/rm/a.txt`), false);
    await put('rm/b.txt', { content: 'b' });
    assert.equal((await d.fetch('/filesystem/rm', { method: 'DELETE' })).status, 422);
    assert.equal((await d.fetch('/filesystem/rm?recursive=true', { method: 'DELETE' })).status, 200);
    assert.equal(existsSync(`${d.root}/rm`), false);
    assert.equal((await d.fetch('/filesystem/rm', { method: 'DELETE' })).status, 404);
  });

  test('a missing file is a 404 with an error message', async () => {
    const res = await d.fetch('/filesystem/missing.txt');
    assert.equal(res.status, 404);
    assert.ok(((await res.json()) as { error: string }).error);
  });
});

describe('trees and searches', () => {
  test('tree PUT writes many files, GET nests the listing, DELETE removes it', async () => {
    const res = await d.fetch(`/filesystem/tree/${enc(`${d.root}/proj`)}`, {
      method: 'PUT',
      json: { files: { 'src/index.ts': 'export {}', 'README.md': '# hi', 'src/lib/util.ts': 'x' } },
    });
    assert.equal(res.status, 200, await res.clone().text());
    const tree = (await (await d.fetch('/filesystem/tree/proj')).json()) as DirectoryJson;
    assert.deepEqual(
      tree.files.map((f) => f.name),
      ['README.md'],
    );
    const src = tree.subdirectories.find((s) => s.name === 'src')!;
    assert.deepEqual(
      src.files?.map((f) => f.name),
      ['index.ts'],
    );
    assert.equal(src.subdirectories?.[0].files?.[0].name, 'util.ts');
    assert.equal(readFileSync(`${d.root}/proj/src/lib/util.ts`, 'utf8'), 'x');
    assert.equal((await d.fetch('/filesystem/tree/proj', { method: 'DELETE' })).status, 200);
    assert.equal(existsSync(`${d.root}/proj`), false);
  });

  test('find lists files by pattern and directories by type, relative to the search root', async () => {
    await d.fetch('/filesystem/tree/find', {
      method: 'PUT',
      json: { files: { 'a.ts': '', 'b.js': '', 'deep/c.ts': '', '.hidden/d.ts': '' } },
    });
    const files = (await (
      await d.fetch('/filesystem-find/find?patterns=*.ts&maxResults=0')
    ).json()) as FindResponse;
    assert.deepEqual(files.matches.map((m) => m.path).sort(), ['a.ts', 'deep/c.ts']);
    assert.equal(files.total, 2);
    const dirs = (await (await d.fetch('/filesystem-find/find?type=directory')).json()) as FindResponse;
    assert.deepEqual(dirs.matches, [{ path: 'deep', type: 'directory' }]);
    const all = (await (
      await d.fetch('/filesystem-find/find?excludeHidden=false&patterns=d.ts')
    ).json()) as FindResponse;
    assert.deepEqual(
      all.matches.map((m) => m.path),
      ['.hidden/d.ts'],
    );
  });

  test('fuzzy search ranks the closest path first', async () => {
    await d.fetch('/filesystem/tree/fz', {
      method: 'PUT',
      json: {
        files: { 'src/components/Button.tsx': '', 'src/utils/strings.ts': '', 'docs/button-guide.md': '' },
      },
    });
    const res = (await (await d.fetch('/filesystem-search/fz?query=button')).json()) as FuzzySearchResponse;
    assert.ok(res.total >= 2);
    assert.match(res.matches[0].path, /button/i);
    assert.ok(!res.matches.some((m) => m.path === 'src/utils/strings.ts'));
  });

  test('content search finds lines with line, column and context', async () => {
    await d.fetch('/filesystem/tree/cs', {
      method: 'PUT',
      json: {
        files: {
          'a.txt': 'one\nTwo needle here\nthree\n',
          'b.md': 'no match',
          'node_modules/x.txt': 'needle',
        },
      },
    });
    const res = (await (
      await d.fetch('/filesystem-content-search/cs?query=NEEDLE&contextLines=1')
    ).json()) as ContentSearchResponse;
    assert.equal(res.query, 'NEEDLE');
    assert.equal(res.total, 1);
    assert.deepEqual(res.matches[0], {
      path: 'a.txt',
      line: 2,
      column: 5,
      text: 'Two needle here',
      context: 'one\nTwo needle here\nthree',
    });
    const sensitive = (await (
      await d.fetch('/filesystem-content-search/cs?query=NEEDLE&caseSensitive=true')
    ).json()) as ContentSearchResponse;
    assert.equal(sensitive.total, 0);
    assert.equal((await d.fetch('/filesystem-content-search/cs')).status, 400);
  });
});

describe('multipart upload', () => {
  test('parts uploaded out of order are assembled in part order on complete', async () => {
    const target = `${d.root}/big/file.bin`;
    const init = await d.fetch(`/filesystem-multipart/initiate/${enc(target)}`, {
      method: 'POST',
      json: { permissions: '0640' },
    });
    assert.equal(init.status, 200);
    const { uploadId, path } = (await init.json()) as { uploadId: string; path: string };
    assert.equal(path, target);
    const chunks = [randomBytes(70_000), randomBytes(70_000), randomBytes(1234)];
    const parts: { partNumber: number; etag: string }[] = [];
    for (const n of [3, 1, 2]) {
      const form = new FormData();
      form.append('file', new Blob([chunks[n - 1]]), 'part');
      const res = await d.fetch(`/filesystem-multipart/${uploadId}/part?partNumber=${n}`, {
        method: 'PUT',
        body: form,
      });
      assert.equal(res.status, 200, await res.clone().text());
      const part = (await res.json()) as { partNumber: number; etag: string; size: number };
      assert.equal(part.size, chunks[n - 1].length);
      parts.push({ partNumber: part.partNumber, etag: part.etag });
    }
    const listed = (await (await d.fetch(`/filesystem-multipart/${uploadId}/parts`)).json()) as {
      parts: unknown[];
    };
    assert.equal(listed.parts.length, 3);
    const done = await d.fetch(`/filesystem-multipart/${uploadId}/complete`, {
      method: 'POST',
      json: { parts },
    });
    assert.equal(done.status, 200, await done.clone().text());
    assert.deepEqual(readFileSync(target), Buffer.concat(chunks));
    assert.equal(statSync(target).mode & 0o777, 0o640);
    assert.equal((await d.fetch(`/filesystem-multipart/${uploadId}/parts`)).status, 404);
  });

  test('abort forgets the upload and writes nothing', async () => {
    const target = `${d.root}/aborted.bin`;
    const { uploadId } = (await (
      await d.fetch(`/filesystem-multipart/initiate/${enc(target)}`, { method: 'POST', json: {} })
    ).json()) as { uploadId: string };
    const form = new FormData();
    form.append('file', new Blob(['abc']), 'part');
    await d.fetch(`/filesystem-multipart/${uploadId}/part?partNumber=1`, { method: 'PUT', body: form });
    assert.equal(
      (await d.fetch(`/filesystem-multipart/${uploadId}/abort`, { method: 'DELETE' })).status,
      200,
    );
    assert.equal(existsSync(target), false);
    const res = await d.fetch(`/filesystem-multipart/${uploadId}/complete`, {
      method: 'POST',
      json: { parts: [{ partNumber: 1 }] },
    });
    assert.equal(res.status, 404);
  });
});
