// Facts about the host the driver needs: its tools, where the server's own code lives, and the
// runtime directory /run/berth (volatile like every sandbox: a reboot clears both).
import { createHash } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { mountsUnder, RUN_SUBDIR } from './disk.js';
import { run } from './exec.js';

export const RUN_DIR = '/run/berth';
/** Writable layers, one tmpfs per sandbox: `<RUN_DIR>/sbx/<name>`. */
export const LAYERS_DIR = `${RUN_DIR}/sbx`;
/** Sandbox API sockets, `<RUN_DIR>/sock/<key>.sock`: root only (the daemon makes its socket 0666). */
export const SOCKETS_DIR = `${RUN_DIR}/sock`;
/**
 * Bind mounts that make directories under private parents reachable by bwrap (see exposeDir): one directory per data
 * dir, `<EXPOSE_DIR>/<data dir key>/<path key>`, so two servers on one host never touch each other's.
 */
const EXPOSE_DIR = `${RUN_DIR}/expose`;
/** Per-sandbox read-only views of host directories (views.ts): `<VIEWS_DIR>/<name>/<i>`. */
export const VIEWS_DIR = `${RUN_DIR}/views`;
/**
 * An empty directory nobody may write: the second layer of every view, and what hides a masked directory of a
 * sandbox's /proc (launch.ts).
 */
export const EMPTY_DIR = `${RUN_DIR}/empty`;
/** An empty file nobody may write, which hides a masked file of a sandbox's /proc (launch.ts). */
export const EMPTY_FILE = `${RUN_DIR}/empty-file`;

const TOOLS = [
  'bwrap',
  'nsenter',
  'setpriv',
  'ip',
  'nft',
  'mount',
  'umount',
  'chown',
  'mkfs.ext4',
  'truncate',
];

/** Fails start-up with one message naming every missing tool (scripts/install.sh installs them). */
export async function requireHostTools(): Promise<void> {
  const missing: string[] = [];
  await Promise.all(
    TOOLS.map((t) =>
      run('sh', ['-c', `command -v ${t}`]).catch(() => {
        missing.push(t);
      }),
    ),
  );
  if (missing.length) {
    throw new Error(
      `sandbox runtime needs ${missing.join(', ')} (apt-get install bubblewrap nftables iproute2 util-linux e2fsprogs)`,
    );
  }
}

/**
 * Creates the runtime directories. They are traversable (0711) but not listable by other users:
 * bwrap runs as each sandbox's unprivileged uid and must reach its own layer and run directory,
 * whose own modes (0700, owned by that uid) keep everyone else out. The sockets are root's alone.
 */
export function ensureRunDirs(): void {
  for (const d of [RUN_DIR, LAYERS_DIR, SOCKETS_DIR, EXPOSE_DIR, VIEWS_DIR, EMPTY_DIR]) {
    mkdirSync(d, { recursive: true });
    chmodSync(d, d === SOCKETS_DIR ? 0o700 : d === EMPTY_DIR ? 0o555 : 0o711);
  }
  writeFileSync(EMPTY_FILE, '');
  chmodSync(EMPTY_FILE, 0o444);
}

export interface SandboxPaths {
  /** Where the host connects: a hard link to the daemon's socket, out of the sandbox's reach (launch.ts). */
  socketPath: string;
}

/** Short (a socket path holds at most 107 bytes) and deterministic for a data dir and sandbox id. */
export function sandboxPaths(dataDir: string, id: string): SandboxPaths {
  const key = createHash('sha256').update(`${dataDir}\0${id}`).digest('hex').slice(0, 16);
  return { socketPath: join(SOCKETS_DIR, `${key}.sock`) };
}

/**
 * Host side of the sandbox's /run/berth (the daemon's socket, the env file): a directory of the sandbox's own
 * writable layer, so whatever it writes there counts against its disk cap like every other file it writes.
 */
export function sandboxRunDir(name: string): string {
  return join(LAYERS_DIR, name, RUN_SUBDIR);
}

/** Root-only directory at the top of the layer, never bound inside: holds the link to the API socket. */
export function sandboxSocketLinkDir(name: string): string {
  return join(LAYERS_DIR, name, '.host');
}

/** Every ancestor of `path` lets others search it, so an unprivileged process can resolve `path`. */
function traversable(path: string): boolean {
  for (let d = dirname(path); ; d = dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) return false;
    if (dirname(d) === d) return true;
  }
}

const key = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 16);

/** The exposures of the server whose data dir is `dataDir` (by its path as given: a server names it one way). */
export const exposeDirOf = (dataDir: string) => join(EXPOSE_DIR, key(dataDir));

/**
 * A path under which an unprivileged bwrap can find `path`. bwrap (0.8) resolves every bind source
 * with realpath() as the sandbox's uid, even for --bind-fd, so a directory below a private parent
 * (a data dir in /root, a test's mkdtemp) is bound once onto `<RUN_DIR>/expose/<data dir>/<hash>`, among the
 * exposures of the server of `dataDir` only. Only that directory becomes reachable, not its siblings; a stale
 * exposure (source replaced) is redone.
 */
export async function exposeDir(dataDir: string, path: string): Promise<string> {
  const real = realpathSync(path);
  if (traversable(real)) return real;
  const own = exposeDirOf(dataDir);
  mkdirSync(own, { recursive: true });
  chmodSync(own, 0o711);
  const target = join(own, key(real));
  const src = statSync(real);
  if (mountsUnder(target).includes(target)) {
    const cur = statSync(target);
    if (cur.ino === src.ino && cur.dev === src.dev) return target;
    await run('umount', ['-l', target]);
  }
  mkdirSync(target, { recursive: true });
  await run('mount', ['--bind', real, target]);
  writeFileSync(`${target}.src`, real);
  return target;
}

/**
 * Removes the exposures of the server of `dataDir` of directories under `prefix` (a volume being deleted; its
 * whole data dir when it closes, `prefix` absent: then every exposure it made, and its directory). Sandboxes
 * already started keep their own references to the directories; only future launches need an exposure.
 */
export async function unexposeUnder(dataDir: string, prefix?: string): Promise<void> {
  const root = prefix === undefined ? '/' : existsSync(prefix) ? realpathSync(prefix) : prefix;
  const own = exposeDirOf(dataDir);
  if (!existsSync(own)) return;
  for (const f of readdirSync(own).filter((n) => n.endsWith('.src'))) {
    const meta = join(own, f);
    let src: string;
    try {
      src = readFileSync(meta, 'utf8');
    } catch (e) {
      // Removed meanwhile by another driver of the same data dir closing.
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw e;
    }
    if (root !== '/' && src !== root && !src.startsWith(`${root}/`)) continue;
    const target = meta.slice(0, -'.src'.length);
    for (const mp of mountsUnder(target)) await run('umount', ['-l', mp]).catch(() => undefined);
    try {
      rmSync(target, { recursive: true, force: true });
    } catch (e) {
      // Exposed again meanwhile by another driver on the same data dir (a server still running beside a closing
      // one): it is in use, so it stays, and so does its record.
      if ((e as NodeJS.ErrnoException).code === 'EBUSY') continue;
      throw e;
    }
    rmSync(meta, { force: true });
  }
  if (prefix === undefined)
    try {
      rmdirSync(own);
    } catch {
      // Not empty: an exposure made again meanwhile by another driver of this data dir stays, with its directory.
    }
}

/** The sandbox API daemon inside codeDir: one bundled file (packages/server/scripts/bundle-daemon.mjs). */
export const DAEMON_ENTRY = 'sandbox-api/daemon.cjs';

/**
 * The server package's built code (`dist`), which holds the sandbox API daemon. When running from
 * sources (tsx), this module sits under `src`, and the built twin is its `dist` sibling.
 */
export function defaultCodeDir(): string {
  const root = dirname(dirname(dirname(fileURLToPath(import.meta.url)))); // .../src or .../dist
  return basename(root) === 'src' ? join(dirname(root), 'dist') : root;
}

/** The node_modules directories Node would search from codeDir upwards, nearest first. */
export function nodeModulesFor(codeDir: string): string[] {
  const out: string[] = [];
  for (let d = dirname(codeDir); ; d = dirname(d)) {
    const nm = join(d, 'node_modules');
    if (existsSync(nm)) out.push(nm);
    if (dirname(d) === d) return out;
  }
}
