// An image config's User (`name`, `uid`, `name:group`, `uid:gid`) as numeric ids, looked up in the image's own
// /etc/passwd and /etc/group as a container engine does. A name the image does not define fails the start.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ImageError } from './errors.js';

/** The highest id a sandbox may take (bwrap maps one id; above this would be overflow ids). */
const MAX_ID = 65533;

function lookup(file: string, name: string): string[] | undefined {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  return text
    .split('\n')
    .map((l) => l.split(':'))
    .find((f) => f[0] === name);
}

export function imageUser(
  rootfs: string,
  user: string | undefined,
  what: string,
): { uid: number; gid: number } {
  if (!user) return { uid: 0, gid: 0 };
  const [u, g] = user.split(':');
  const passwd = /^\d+$/.test(u) ? undefined : lookup(join(rootfs, 'etc/passwd'), u);
  const uid = /^\d+$/.test(u) ? Number(u) : passwd ? Number(passwd[2]) : Number.NaN;
  if (!Number.isInteger(uid) || uid > MAX_ID)
    throw new ImageError(
      'UNSUPPORTED',
      `${what}: its User ${JSON.stringify(user)} is not defined in the image's /etc/passwd`,
    );
  let gid = passwd ? Number(passwd[3]) : uid;
  if (g !== undefined) {
    const group = /^\d+$/.test(g) ? undefined : lookup(join(rootfs, 'etc/group'), g);
    gid = /^\d+$/.test(g) ? Number(g) : group ? Number(group[2]) : Number.NaN;
  }
  if (!Number.isInteger(gid) || gid > MAX_ID)
    throw new ImageError(
      'UNSUPPORTED',
      `${what}: the group of its User ${JSON.stringify(user)} is not defined in the image`,
    );
  return { uid, gid };
}
