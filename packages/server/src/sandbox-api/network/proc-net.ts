// Which TCP ports are listened on, and by whom, read from /proc (no `ss`/`lsof` in minimal images). Reads the
// network namespace the daemon is in, which inside a sandbox is the sandbox's own.
import { readdir, readFile, readlink } from 'node:fs/promises';

export interface Listener {
  protocol: 'tcp' | 'tcp6';
  localAddr: string;
  localPort: number;
  inode: string;
}

/** The `st` column value of a listening socket in /proc/net/tcp{,6}. */
const TCP_LISTEN = '0A';

export async function readListeners(): Promise<Listener[]> {
  const out: Listener[] = [];
  for (const protocol of ['tcp', 'tcp6'] as const) {
    const text = await readFile(`/proc/net/${protocol}`, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || f[3] !== TCP_LISTEN) continue;
      const [addrHex, portHex] = f[1].split(':');
      out.push({
        protocol,
        localAddr: decodeAddr(addrHex),
        localPort: Number.parseInt(portHex, 16),
        inode: f[9],
      });
    }
  }
  return out;
}

export async function listeningPorts(): Promise<Set<number>> {
  return new Set((await readListeners()).map((l) => l.localPort));
}

/** `pid` and every process below it (a `sh -c` wrapper's server is its child). */
export async function processTree(pid: number): Promise<number[]> {
  const parents = new Map<number, number[]>();
  for (const name of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    // The command name (2nd field) may contain spaces and parentheses: parse after its closing ')'.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (!Number.isFinite(ppid)) continue;
    const list = parents.get(ppid) ?? [];
    list.push(Number(name));
    parents.set(ppid, list);
  }
  const tree: number[] = [];
  const queue = [pid];
  while (queue.length) {
    const p = queue.shift()!;
    tree.push(p);
    queue.push(...(parents.get(p) ?? []));
  }
  return tree;
}

/** Socket inodes held open by `pid`, mapped to that pid. */
export async function socketInodes(pids: number[]): Promise<Map<string, number>> {
  const inodes = new Map<string, number>();
  for (const pid of pids) {
    const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
    for (const fd of fds) {
      const link = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
      const m = /^socket:\[(\d+)\]$/.exec(link);
      if (m) inodes.set(m[1], pid);
    }
  }
  return inodes;
}

/** /proc/net stores each 32-bit word of an address in host (little-endian) byte order. */
function decodeAddr(hex: string): string {
  const words = hex.match(/.{8}/g) ?? [];
  const bytes = words.flatMap((w) => (w.match(/../g) ?? []).reverse().map((b) => Number.parseInt(b, 16)));
  if (bytes.length === 4) return bytes.join('.');
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i] << 8) | bytes[i + 1]).toString(16));
  return groups.join(':');
}
