// Writing a file into a sandbox's run dir from the host, as root. The directory belongs to the sandbox, so
// nothing here may follow a name it could have planted: an exclusive create of an unguessable temporary name,
// fchown on the descriptor, and rename (which replaces the entry, symlink or not, without following it).
import { randomBytes } from 'node:crypto';
import { closeSync, fchownSync, openSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export function writeRunFile(runDir: string, uid: number, name: string, content: string, mode = 0o600): void {
  const tmp = join(runDir, `.${name}.${randomBytes(8).toString('hex')}`);
  const fd = openSync(tmp, 'wx', mode);
  try {
    fchownSync(fd, uid, uid);
    writeSync(fd, content);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, join(runDir, name)); // readers never see half a file
}
