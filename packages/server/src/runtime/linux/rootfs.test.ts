import assert from 'node:assert/strict';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ensureBaseEtc, ensureInitLayer, rootfsPlan } from './rootfs.js';

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

test('the default image is the host userland under its root; an image root is the init layer, the layers, the image', () => {
  const base = { initLayer: '/x/init', hostRoot: '/x/host-root', etcView: '/v/0' };
  const host = rootfsPlan(base);
  assert.deepEqual(host.overlays[0], { target: '', name: 'root', lowers: ['/x/init', '/x/host-root'] });
  assert.ok(host.overlays.some((o) => o.target === 'usr' && o.lowers[0] === '/usr'));
  assert.deepEqual(
    host.binds.map((b) => b.dest),
    ['/etc/hosts', '/etc/hostname', '/etc/resolv.conf'],
  );
  assert.ok(host.binds.every((b) => b.src.startsWith('/v/0/')));
  const img = rootfsPlan({ ...base, image: { rootfs: '/img', layers: ['/l2', '/l1'] } });
  assert.deepEqual(img.overlays, [{ target: '', name: 'root', lowers: ['/x/init', '/l2', '/l1', '/img'] }]);
  assert.ok(img.binds.some((b) => b.dest === '/opt/berth-host' && b.src === '/usr'));
});

test('the init layer holds every mount point the runtime adds, and nothing of an image', () => {
  const root = mkdtempSync(join(tmpdir(), 'berth-init-'));
  try {
    const init = ensureInitLayer(root);
    for (const p of [
      'dev',
      'proc',
      'run/berth',
      'tmp',
      'home/user',
      'opt/berth',
      'opt/berth-host',
      'etc/hosts',
    ])
      assert.ok(existsSync(join(init, p)), p);
    assert.equal(statSync(join(init, 'tmp')).mode & 0o7777, 0o1777);
    assert.equal(ensureInitLayer(root), init, 'built once, then reused');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
