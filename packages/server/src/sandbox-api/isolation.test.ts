import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { enc, startSandboxDaemon, type TestDaemon } from '../test-support/sandbox-daemon.js';

let d: TestDaemon;
let outside: string;
before(async () => {
  d = await startSandboxDaemon();
  outside = mkdtempSync(join(tmpdir(), 'berth-outside-'));
  writeFileSync(join(outside, 'secret.txt'), 'top secret');
  symlinkSync('/etc/passwd', join(d.root, 'passwd-link'));
  symlinkSync('/', join(d.root, 'slash'));
  symlinkSync(join(outside, 'created-through-link.txt'), join(d.root, 'dangling'));
  mkdirSync(join(d.root, 'inside'));
  writeFileSync(join(d.root, 'inside', 'ok.txt'), 'ok');
  symlinkSync(join(d.root, 'inside'), join(d.root, 'inside-link'));
});
after(async () => {
  await d.close();
  rmSync(outside, { recursive: true, force: true });
});

async function refused(res: Response): Promise<void> {
  assert.equal(res.status, 403, await res.clone().text());
  const body = (await res.json()) as { error: string };
  assert.match(body.error, /outside the sandbox root/);
}

/** A raw request, so the client does not normalise `..` away before it reaches the daemon. */
function rawGet(path: string): Promise<number> {
  const u = new URL(d.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path, method: 'GET' }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('paths never leave the root', () => {
  test('encoded ../ traversal is refused', async () => {
    await refused(await d.fetch(`/filesystem/..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd`));
    await refused(await d.fetch(`/filesystem/${enc('inside/../../../etc/passwd')}`));
  });

  test('unencoded ../ sent as is is refused', async () => {
    assert.equal(await rawGet('/filesystem/../../../../../etc/passwd'), 403);
  });

  test('an absolute path outside the root is refused for read, write and delete', async () => {
    await refused(await d.fetch(`/filesystem/${enc('/etc/passwd')}`));
    await refused(await d.fetch(`/filesystem/${enc(join(outside, 'secret.txt'))}`));
    await refused(
      await d.fetch(`/filesystem/${enc(join(outside, 'new.txt'))}`, {
        method: 'PUT',
        json: { content: 'x' },
      }),
    );
    await refused(await d.fetch(`/filesystem/${enc(join(outside, 'secret.txt'))}`, { method: 'DELETE' }));
    assert.equal(existsSync(join(outside, 'new.txt')), false);
    assert.equal(existsSync(join(outside, 'secret.txt')), true);
  });

  test('a symlink to a file outside is refused', async () => {
    await refused(await d.fetch('/filesystem/passwd-link'));
    await refused(
      await d.fetch('/filesystem/passwd-link', { headers: { accept: 'application/octet-stream' } }),
    );
    await refused(await d.fetch('/filesystem/passwd-link', { method: 'PUT', json: { content: 'pwned' } }));
  });

  test('a symlinked directory pointing outside is refused at any depth', async () => {
    await refused(await d.fetch(`/filesystem/${enc('slash/etc/passwd')}`));
    await refused(await d.fetch(`/filesystem/slash`));
    await refused(await d.fetch(`/filesystem-find/slash`));
    await refused(await d.fetch(`/filesystem-content-search/slash?query=root`));
  });

  test('a dangling symlink cannot be used to create a file outside', async () => {
    await refused(await d.fetch('/filesystem/dangling', { method: 'PUT', json: { content: 'x' } }));
    assert.equal(existsSync(join(outside, 'created-through-link.txt')), false);
  });

  test('/proc/self/root tricks are refused', async () => {
    await refused(await d.fetch(`/filesystem/${enc('/proc/self/root/etc/passwd')}`));
    symlinkSync('/proc/self/root', join(d.root, 'procroot'));
    await refused(await d.fetch(`/filesystem/${enc('procroot/etc/passwd')}`));
  });

  test('process working directories and tree entries outside are refused', async () => {
    await refused(
      await d.fetch('/process', { method: 'POST', json: { command: 'pwd', workingDir: '/etc' } }),
    );
    const res = await d.fetch('/filesystem/tree/inside', {
      method: 'PUT',
      json: { files: { '../../escape.txt': 'x' } },
    });
    assert.equal(res.status, 400);
    assert.equal(existsSync(join(d.root, '..', 'escape.txt')), false);
  });

  test('symlinks that stay inside the root keep working', async () => {
    const res = await d.fetch(`/filesystem/${enc('inside-link/ok.txt')}`);
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { content: string }).content, 'ok');
    // Deleting a link removes the link, not the directory it points to.
    assert.equal((await d.fetch('/filesystem/inside-link', { method: 'DELETE' })).status, 200);
    assert.equal(existsSync(join(d.root, 'inside', 'ok.txt')), true);
  });
});
