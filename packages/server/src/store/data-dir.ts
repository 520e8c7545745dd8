// The data dir holds the database (every tenant's records and sealed secrets), the master key and the sandboxes'
// state: no other local user may read any of it. Made 0700 at start, every file directly in it 0600 (the
// directory's mode already keeps everyone else away from what lies deeper), fixed when found looser.
import { chmodSync, lstatSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const DIR_MODE = 0o700;
const FILE_MODE = 0o600;
/** For the server's whole life: files it creates are its own (SQLite's -wal and -shm copy the database's). */
export const SERVER_UMASK = 0o077;

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
