// The machine-wide lock that tests starting real sandboxes hold (`flock /tmp/berth-runtime.lock ...`):
// sandboxes use kernel names (cgroups, network namespaces, host uids) that two runs must not share.
// Held here from inside a test, unless a process this one descends from already holds it (the test run
// was started under `flock`), which would otherwise deadlock.
import { spawn } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';

export const RUNTIME_LOCK = '/tmp/berth-runtime.lock';

function ancestors(): Set<number> {
  const out = new Set<number>();
  let pid = process.pid;
  while (pid > 1 && !out.has(pid)) {
    out.add(pid);
    try {
      // Field 4 of /proc/<pid>/stat, after the parenthesised command name (which may hold spaces).
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      pid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    } catch {
      break;
    }
  }
  return out;
}

/** True when an ancestor of this process holds the flock on RUNTIME_LOCK (per /proc/locks). */
export function heldByAncestor(): boolean {
  let ino: number;
  try {
    ino = statSync(RUNTIME_LOCK).ino;
  } catch {
    return false;
  }
  const mine = ancestors();
  for (const line of readFileSync('/proc/locks', 'utf8').split('\n')) {
    // "1: FLOCK  ADVISORY  WRITE 2206 fe:00:2146913 0 EOF"; waiters are marked "->" and hold nothing.
    const m = /^\d+:\s+FLOCK\s+\S+\s+\S+\s+(\d+)\s+[0-9a-f]+:[0-9a-f]+:(\d+)\s/.exec(line);
    if (m && Number(m[2]) === ino && mine.has(Number(m[1]))) return true;
  }
  return false;
}

/**
 * Waits up to `waitS` seconds for the lock (as `flock -w` does) and resolves with its release, or with
 * null when another run kept it that long.
 */
export async function holdRuntimeLock(waitS: number): Promise<(() => Promise<void>) | null> {
  if (heldByAncestor()) return async () => {};
  try {
    writeFileSync(RUNTIME_LOCK, '', { flag: 'a' });
  } catch {}
  // flock holds the lock while `cat` runs; `cat` ends when our end of its stdin closes, also if we die.
  const child = spawn(
    'flock',
    ['-w', String(waitS), RUNTIME_LOCK, 'sh', '-c', 'echo held; exec cat >/dev/null'],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  const held = await new Promise<boolean>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', () => resolve(false));
    child.stdout.once('data', () => resolve(true));
  });
  if (!held) return null;
  child.removeAllListeners('exit');
  return () =>
    new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.stdin.end();
    });
}
