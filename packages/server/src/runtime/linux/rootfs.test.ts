import assert from 'node:assert/strict';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ensureBaseEtc, hostRoot, ociRoot } from './rootfs.js';

function fakeHostEtc(root: string): string {
  const etc = join(root, 'host-etc');
  mkdirSync(join(etc, 'ssl', 'certs'), { recursive: true });
  mkdirSync(join(etc, 'ssl', 'private'), { recursive: true });
  writeFileSync(join(etc, 'ssl', 'private', 'server.key'), 'KEY');
  writeFileSync(join(etc, 'ssl', 'certs', 'ca.pem'), 'CA');
  writeFileSync(join(etc, 'shadow'), 'root:$6$secret');
  writeFileSync(
    join(etc, 'passwd'),
    'root:x:0:0::/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/bash\n',
  );
  writeFileSync(join(etc, 'npmrc'), '//registry/:_authToken=secret');
  writeFileSync(join(etc, 'resolv.conf'), 'nameserver 192.0.2.53\n');
  symlinkSync('../usr/lib/os-release', join(etc, 'os-release'));
  return etc;
}

test('base etc copies an allowlist: no shadow, private keys or tokens; users are generated', () => {
  const root = mkdtempSync(join(tmpdir(), 'berth-etc-'));
  try {
    const etc = ensureBaseEtc(join(root, 'data'), fakeHostEtc(root));
    assert.equal(existsSync(join(etc, 'shadow')), false);
    assert.equal(existsSync(join(etc, 'ssl', 'private')), false);
    assert.equal(existsSync(join(etc, 'npmrc')), false);
    assert.equal(readFileSync(join(etc, 'ssl', 'certs', 'ca.pem'), 'utf8'), 'CA');
    assert.doesNotMatch(readFileSync(join(etc, 'passwd'), 'utf8'), /alice/);
    assert.match(readFileSync(join(etc, 'passwd'), 'utf8'), /^user:x:1000:1000:user:\/home\/user:/m);
    assert.equal(readFileSync(join(etc, 'resolv.conf'), 'utf8'), 'nameserver 192.0.2.53\n');
    assert.equal(ensureBaseEtc(join(root, 'data'), join(root, 'host-etc')), etc, 'built once, then reused');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('the default image is the host userland read-only; an image root keeps its own tree and /etc', () => {
  const root = mkdtempSync(join(tmpdir(), 'berth-img-'));
  try {
    const entries = hostRoot('/x/base-etc');
    assert.deepEqual(entries[0], { kind: 'bind', src: '/usr', dest: '/usr', readOnly: true });
    assert.ok(entries.every((e) => e.kind === 'symlink' || e.readOnly));
    assert.ok(entries.some((e) => e.kind === 'bind' && e.dest === '/etc' && e.src === '/x/base-etc'));
    const alpine = join(root, 'alpine');
    for (const d of ['usr', 'etc', 'proc', 'opt']) mkdirSync(join(alpine, d), { recursive: true });
    symlinkSync('usr/bin', join(alpine, 'bin'));
    const img = ociRoot(alpine, '/x/base-etc');
    assert.ok(img.every((e) => e.kind === 'symlink' || e.readOnly));
    assert.ok(img.some((e) => e.kind === 'bind' && e.dest === '/usr' && e.src === join(alpine, 'usr')));
    assert.ok(img.some((e) => e.kind === 'bind' && e.dest === '/opt' && e.src === join(alpine, 'opt')));
    assert.ok(img.some((e) => e.kind === 'symlink' && e.dest === '/bin' && e.target === 'usr/bin'));
    assert.ok(img.some((e) => e.kind === 'bind' && e.dest === '/etc' && e.src === join(alpine, 'etc')));
    assert.ok(
      img.some(
        (e) => e.kind === 'bind' && e.dest === '/etc/resolv.conf' && e.src === '/x/base-etc/resolv.conf',
      ),
    );
    assert.ok(img.some((e) => e.kind === 'bind' && e.dest === '/opt/berth-host' && e.src === '/usr'));
    assert.ok(!img.some((e) => e.dest === '/proc'), 'the runtime provides /proc itself');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
