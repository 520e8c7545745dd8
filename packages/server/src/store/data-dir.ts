// The data dir holds the database (every tenant's records and sealed secrets), the master key and the sandboxes'
// state: no other local user may read any of it. Made 0700 at start, every file directly in it 0600 (the
// directory's mode already keeps everyone else away from what lies deeper), fixed when found looser.
import { chmodSync, closeSync, lstatSync, mkdirSync, openSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const DIR_MODE = 0o700;
const FILE_MODE = 0o600;
/**
 * The umask `berth serve` runs with: files it creates are its own. Set by the command, not by startServer, because
 * a umask is process-wide and a program embedding the server (or a test) keeps its own; sandboxes set theirs.
 */
export const SERVER_UMASK = 0o077;

/**
 * Creates the database file 0600 before SQLite opens it, whatever the umask: SQLite gives its -wal and -shm files
 * the database file's mode, so they are the server's alone too.
 */
export function createPrivateFile(path: string): void {
  closeSync(openSync(path, 'a', FILE_MODE)); // an existing file keeps its mode: secureDataDir has judged it
}

/** Creates or tightens `dir`; returns the paths whose modes were looser than allowed (to log once). */
export function secureDataDir(dir: string): string[] {
  mkdirSync(dir, { recursive: true, mode: DIR_MODE });
  const fixed: string[] = [];
  const tighten = (path: string, mode: number, current: number) => {
    if ((current & 0o777 & ~mode) === 0) return;
    chmodSync(path, current & mode);
    fixed.push(path);
  };
  tighten(dir, DIR_MODE, lstatSync(dir).mode);
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = lstatSync(p);
    if (st.isFile()) tighten(p, FILE_MODE, st.mode); // not through symlinks: they may point anywhere
  }
  return fixed;
}
