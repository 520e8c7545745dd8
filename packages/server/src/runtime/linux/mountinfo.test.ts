// The mount table parser both the host's unmounts and the sandboxes' drive lists read through.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseMountInfo, readMountInfo, readMountInfoAsync } from './mountinfo.js';

describe('mountinfo', () => {
  it('reads device, root, mount point (octal escapes undone), per-mount options and type, with or without optional fields', () => {
    const text = [
      '276 74 0:90 /newroot / ro,nosuid,nodev,relatime - tmpfs tmpfs rw,uid=1000',
      '301 276 7:3 /sub\\040dir /tmp/only\\040sub ro,nosuid,nodev,relatime,idmapped shared:5 master:2 - ext4 /dev/loop3 rw',
      'garbage line',
      '',
    ].join('\n');
    assert.deepEqual(parseMountInfo(text), [
      {
        dev: '0:90',
        root: '/newroot',
        mountPoint: '/',
        options: ['ro', 'nosuid', 'nodev', 'relatime'],
        fsType: 'tmpfs',
      },
      {
        dev: '7:3',
        root: '/sub dir',
        mountPoint: '/tmp/only sub',
        options: ['ro', 'nosuid', 'nodev', 'relatime', 'idmapped'],
        fsType: 'ext4',
      },
    ]);
  });

  it("reads this process's own table, which has a root mount", () => {
    assert.ok(readMountInfo().some((m) => m.mountPoint === '/'));
  });

  it('reads, naming a path, every mount of the table at or under it (only those lines are parsed)', async () => {
    const under = (m: { mountPoint: string }) =>
      m.mountPoint === '/proc' || m.mountPoint.startsWith('/proc/');
    const all = readMountInfo().filter(under);
    assert.ok(all.length > 0);
    assert.deepEqual((await readMountInfoAsync('self', '/proc')).filter(under), all);
  });
});
