// Drives end to end, with real loop mounts and real sandboxes: mounted live into running sandboxes (several at
// once, a subdirectory, read-only for root inside), refused by label rules, unmounted, capped by the file system,
// and gone from the sandbox's namespace with it, leaving nothing mounted on the host.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { exec, type SandboxServer, startSandboxServer, TEST_MEMORY_MB } from './support.js';
import { removeDirLater, removeSandboxesIn, unmountVolumesIn } from '../../src/test-support/sandboxes.js';

async function drive(s: SandboxServer, name: string, spec: object) {
  const r = await s.api('/drives', { method: 'POST', json: { metadata: { name }, spec } });
  assert.equal(r.status, 200, await r.text());
  for (let i = 0; i < 200; i++) {
    const d = await (await s.api(`/drives/${name}`)).json();
    if (d.status === 'DEPLOYED') return d;
    assert.notEqual(d.status, 'FAILED', JSON.stringify(d.events));
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`drive ${name} never deployed`);
}

const mount = (s: SandboxServer, url: string, body: object) =>
  s.run(`${url}/drives/mount`, { method: 'POST', json: body });

async function mounted(s: SandboxServer, url: string, body: object) {
  const r = await mount(s, url, body);
  const b = await r.json();
  assert.equal(r.status, 200, JSON.stringify(b));
  assert.equal(b.success, true);
  return b;
}

const hostMounts = () => readFileSync('/proc/self/mountinfo', 'utf8');

describe('drives mounted live into real sandboxes', () => {
  let s: SandboxServer;
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-drive-'));
  before(async () => {
    s = await startSandboxServer({}, dataDir);
  });
  after(async () => {
    await s.close();
    await removeSandboxesIn(dataDir);
    await unmountVolumesIn(dataDir);
    removeDirLater(dataDir);
  });

  it("two running sandboxes mount one drive and see each other's writes; a subdirectory mounts alone; unmount detaches", async () => {
    await drive(s, 'shared', { size: 16 });
    const a = await s.create('da');
    const b = await s.create('db');
    await mounted(s, a.metadata.url, { driveName: 'shared', mountPath: '/tmp/shared' });
    await mounted(s, b.metadata.url, { driveName: 'shared', mountPath: '/home/user/shared' });
    const w = await exec(
      s,
      a.metadata.url,
      'mkdir -p /tmp/shared/sub && echo from-a > /tmp/shared/sub/f && echo ok',
    );
    assert.equal(w.stdout.trim(), 'ok', w.stderr);
    const r = await exec(
      s,
      b.metadata.url,
      'cat /home/user/shared/sub/f && echo from-b >> /home/user/shared/sub/f && stat -c %u /home/user/shared/sub/f',
    );
    assert.deepEqual(r.stdout.trim().split('\n'), ['from-a', '0'], r.stderr);
    const back = await exec(s, a.metadata.url, 'cat /tmp/shared/sub/f');
    assert.equal(back.stdout, 'from-a\nfrom-b\n');

    await mounted(s, b.metadata.url, { driveName: 'shared', mountPath: '/tmp/only-sub', drivePath: '/sub' });
    const sub = await exec(s, b.metadata.url, 'ls /tmp/only-sub');
    assert.equal(sub.stdout.trim(), 'f');

    const list = await (await s.run(`${b.metadata.url}/drives/mount`)).json();
    assert.deepEqual(
      list.mounts.map((m: any) => [m.driveName, m.drivePath, m.mountPath, m.readOnly]).sort(),
      [
        ['shared', '/', '/home/user/shared', false],
        ['shared', '/sub', '/tmp/only-sub', false],
      ],
    );
    const un = await s.run(`${b.metadata.url}/drives/mount/tmp/only-sub`, { method: 'DELETE' });
    assert.equal(un.status, 200, await un.text());
    const gone = await exec(s, b.metadata.url, 'ls /tmp/only-sub | wc -l');
    assert.equal(gone.stdout.trim(), '0');
    const again = await s.run(`${b.metadata.url}/drives/mount/tmp/only-sub`, { method: 'DELETE' });
    assert.equal(again.status, 404);
  });

  it('a drive mounted read-only cannot be written by root inside, nor remounted read-write; a write past the cap is ENOSPC', async () => {
    const c = await s.create('dc');
    await mounted(s, c.metadata.url, { driveName: 'shared', mountPath: '/home/user/ro', readOnly: true });
    const r = await exec(
      s,
      c.metadata.url,
      'id -u; cat /home/user/ro/sub/f | head -1; sh -c "echo x > /home/user/ro/sub/f" 2>&1; echo w=$?; mount -o remount,rw /home/user/ro 2>&1; echo m=$?',
    );
    const lines = r.stdout.trim().split('\n');
    assert.equal(lines[0], '0');
    assert.equal(lines[1], 'from-a');
    assert.ok(
      lines.some((l: string) => /Read-only file system/.test(l)),
      r.stdout,
    );
    assert.ok(!lines.includes('w=0') && !lines.includes('m=0'), r.stdout);

    await mounted(s, c.metadata.url, { driveName: 'shared', mountPath: '/home/user/rw' });
    const full = await exec(
      s,
      c.metadata.url,
      'dd if=/dev/zero of=/home/user/rw/big bs=1M count=64 2>&1; rm -f /home/user/rw/big',
    );
    assert.match(full.stdout, /No space left on device/);
  });

  it('label rules: a matching sandbox mounts, another is refused with 403, a read grant is read-only', async () => {
    await drive(s, 'team', {
      size: 16,
      permissions: [
        { labels: { team: 'red' }, mode: 'read-write' },
        { labels: { team: 'blue' }, mode: 'read' },
      ],
    });
    const labelled = async (name: string, team: string) => {
      const res = await s.api('/sandboxes', {
        method: 'POST',
        json: { metadata: { name, labels: { team } }, spec: { runtime: { memory: TEST_MEMORY_MB } } },
      });
      assert.equal(res.status, 200);
      return s.waitFor(name, (x) => x.status === 'DEPLOYED', 'DEPLOYED');
    };
    const red = await labelled('red', 'red');
    const blue = await labelled('blue', 'blue');
    const green = await labelled('green', 'green');
    const refused = await mount(s, green.metadata.url, { driveName: 'team', mountPath: '/home/user/t' });
    assert.equal(refused.status, 403);
    assert.match((await refused.json()).detail, /permission denied: .*labels match none/);
    await mounted(s, red.metadata.url, { driveName: 'team', mountPath: '/home/user/t' });
    const blueRw = await mount(s, blue.metadata.url, { driveName: 'team', mountPath: '/home/user/t' });
    assert.equal(blueRw.status, 403);
    assert.match((await blueRw.json()).detail, /read access only/);
    await mounted(s, blue.metadata.url, { driveName: 'team', mountPath: '/home/user/t', readOnly: true });
    const missing = await mount(s, red.metadata.url, { driveName: 'nope', mountPath: '/home/user/n' });
    assert.equal(missing.status, 404);
  });

  it("a symlink planted in the drive does not reach a directory the sandbox's permission does not cover", async () => {
    // The owner (the admin) keeps a secret under /b, which only sandboxes labelled team=b may mount.
    await drive(s, 'split', {
      size: 16,
      permissions: [
        { labels: { role: 'owner' }, path: '/' },
        { labels: { team: 'a' }, path: '/a' },
        { labels: { team: 'b' }, path: '/b' },
      ],
    });
    const labelled = async (name: string, labels: Record<string, string>, key?: string) => {
      const res = await s.api('/sandboxes', {
        method: 'POST',
        key,
        json: { metadata: { name, labels }, spec: { runtime: { memory: TEST_MEMORY_MB } } },
      });
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      return body.metadata.url as string;
    };
    const owner = await labelled('split-owner', { role: 'owner' });
    await mounted(s, owner, { driveName: 'split', mountPath: '/home/user/all' });
    const made = await exec(
      s,
      owner,
      'mkdir -p /home/user/all/a /home/user/all/b && echo owner-secret > /home/user/all/b/secret && echo ok',
    );
    assert.equal(made.stdout.trim(), 'ok', made.stderr);

    // A second principal of the workspace, acting only with its own key, runs a sandbox allowed /a only.
    const sa = await (
      await s.api('/service_accounts', { method: 'POST', json: { name: 'drive-user', role: 'member' } })
    ).json();
    const key = (
      await (await s.api(`/service_accounts/${sa.client_id}/api_keys`, { method: 'POST', json: {} })).json()
    ).apiKey;
    const as = { 'x-blaxel-authorization': `Bearer ${key}` };
    const url = await labelled('split-a', { team: 'a' }, key);
    const asUser = (path: string, body: object) =>
      s.run(`${url}${path}`, { method: 'POST', headers: as, json: body });
    const own = await asUser('/drives/mount', {
      driveName: 'split',
      mountPath: '/home/user/a',
      drivePath: '/a',
    });
    assert.equal(own.status, 200, await own.text());
    const direct = await asUser('/drives/mount', {
      driveName: 'split',
      mountPath: '/tmp/b',
      drivePath: '/b',
    });
    assert.equal(direct.status, 403, 'the permission does not reach /b');
    const planted = await asUser('/process', {
      command: 'ln -s ../b /home/user/a/esc && ls /home/user/a',
      waitForCompletion: true,
    });
    assert.equal((await planted.json()).stdout.trim(), 'esc');

    // The attack: mount /a/esc, which the permission for /a reaches by its name, and which leads to /b.
    const through = await asUser('/drives/mount', {
      driveName: 'split',
      mountPath: '/tmp/esc',
      drivePath: '/a/esc',
    });
    const answer = await through.json();
    assert.equal(through.status, 422, JSON.stringify(answer));
    assert.match(answer.detail, /drivePath \/a\/esc goes through a symbolic link/);
    const read = await asUser('/process', {
      command: 'cat /tmp/esc/secret 2>&1; ls -A /tmp/esc 2>&1 | wc -l',
      waitForCompletion: true,
    });
    const out = (await read.json()).stdout;
    assert.doesNotMatch(out, /owner-secret/);
    const mounts = await (await s.run(`${url}/drives/mount`, { headers: as })).json();
    assert.deepEqual(
      mounts.mounts.map((m: any) => [m.drivePath, m.mountPath]),
      [['/a', '/home/user/a']],
    );
  });

  it("a mount point in the root or under an image directory is made; writes land in the sandbox's own layer, never in the image", async () => {
    const f = await s.create('df');
    const url = f.metadata.url;
    const entries = async (dir: string) => (await exec(s, url, `ls -A ${dir}`)).stdout.trim().split('\n');
    const usrShare = await entries('/usr/share');
    assert.ok(usrShare.length > 10, 'the image directory has content');
    await mounted(s, url, { driveName: 'shared', mountPath: '/data' });
    await mounted(s, url, { driveName: 'shared', mountPath: '/usr/share/drive/deeper', drivePath: '/sub' });
    const r = await exec(
      s,
      url,
      [
        'head -1 /data/sub/f',
        'head -1 /usr/share/drive/deeper/f',
        'echo w > /data/w && echo wrote',
        'for p in /x /usr/share/x /usr/share/drive/x; do touch $p 2>/dev/null; echo $?; done',
      ].join('; '),
    );
    // The root is the image under the sandbox's copy-on-write layer (decision 051): these writes are the sandbox's
    // own; the image (here the host's own userland) gets none of them.
    assert.deepEqual(r.stdout.trim().split('\n'), ['from-a', 'from-a', 'wrote', '0', '0', '0'], r.stderr);
    for (const p of ['/x', '/usr/share/x', '/usr/share/drive'])
      assert.ok(!existsSync(p), `${p} is not on the host`);
    // Every entry of the image directory is still there, beside the new mount point and the sandbox's own file.
    assert.deepEqual((await entries('/usr/share')).sort(), [...usrShare, 'drive', 'x'].sort());
    const list = await (await s.run(`${url}/drives/mount`)).json();
    assert.deepEqual(
      list.mounts.map((m: any) => [m.drivePath, m.mountPath]),
      [
        ['/', '/data'],
        ['/sub', '/usr/share/drive/deeper'],
      ],
    );
    // Through a symlink: the mount is where the link leads, and is listed and unmounted under that name.
    await exec(s, url, 'ln -s /usr/lib /home/user/lib-link');
    const via = await mounted(s, url, { driveName: 'shared', mountPath: '/home/user/lib-link/via-link' });
    assert.equal(via.mountPath, '/usr/lib/via-link');
    assert.equal((await exec(s, url, 'head -1 /usr/lib/via-link/sub/f')).stdout, 'from-a\n');
    const listed = await (await s.run(`${url}/drives/mount`)).json();
    assert.ok(listed.mounts.some((m: any) => m.mountPath === '/usr/lib/via-link'));
    const un = await s.run(`${url}/drives/mount/usr/lib/via-link`, { method: 'DELETE' });
    assert.equal(un.status, 200, await un.text());
    // The root is writable (decision 051): another mount beside those under /usr needs no overlay that would hide them.
    await mounted(s, url, { driveName: 'shared', mountPath: '/usr/other' });
    const after = (await (await s.run(`${url}/drives/mount`)).json()).mounts.map((m: any) => m.mountPath);
    assert.ok(
      after.includes('/usr/share/drive/deeper') && after.includes('/usr/other'),
      JSON.stringify(after),
    );
    assert.equal((await exec(s, url, 'head -1 /usr/share/drive/deeper/f')).stdout, 'from-a\n');
  });

  it('a sandbox deleted with drives mounted leaves no mount of them on the host', async () => {
    const e = await s.create('de');
    await mounted(s, e.metadata.url, { driveName: 'shared', mountPath: '/home/user/e' });
    await s.api('/sandboxes/de', { method: 'DELETE' });
    await s.waitFor('de', (b, st) => st === 404 || b.status === 'TERMINATED', 'TERMINATED');
    assert.ok(!hostMounts().includes('/home/user/e'), 'no mount at the sandbox path on the host');
    // The drive itself is mounted once on the host (its image), never once per sandbox.
    const drives = hostMounts()
      .split('\n')
      .filter((l) => l.includes(join(dataDir, 'drives', 'default', 'shared')));
    assert.equal(drives.length, 1, drives.join('\n'));
  });
});
