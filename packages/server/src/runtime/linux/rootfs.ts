// The sandbox's root file system: a read-only image (the host's own /usr by default, or an image from the
// store), a curated /etc, and the writable layer on top.
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';

/** Bumped whenever the list below changes, so an old base-etc is rebuilt. */
const BASE_ETC_VERSION = '3';
export const SANDBOX_HOSTNAME = 'sandbox';

/**
 * Host /etc entries a sandbox may see: name resolution, TLS roots, dynamic linker, time zone, shells.
 * An allowlist on purpose: never shadow/gshadow, ssl/private, SSH keys, npmrc/pip.conf/gitconfig
 * (they may hold tokens), machine-id, or anything naming the data dir.
 */
const COPIED_ETC = [
  'ssl/certs',
  'ssl/openssl.cnf',
  'ca-certificates.conf',
  'alternatives',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'localtime',
  'timezone',
  'protocols',
  'services',
  'networks',
  'ethertypes',
  'gai.conf',
  'host.conf',
  'mime.types',
  'magic',
  'magic.mime',
  'profile',
  'profile.d',
  'bash.bashrc',
  'inputrc',
  'shells',
  'os-release',
  'debian_version',
  'locale.alias',
  'terminfo',
  'python3',
  'perl',
];

const GENERATED_ETC: Record<string, string> = {
  passwd: [
    'root:x:0:0:root:/home/user:/bin/bash',
    'user:x:1000:1000:user:/home/user:/bin/bash',
    'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin',
    '',
  ].join('\n'),
  group: ['root:x:0:', 'user:x:1000:', 'nogroup:x:65534:', ''].join('\n'),
  // IPv4 only: IPv6 is off inside (network.ts), so `localhost` must not name ::1, which nothing could bind.
  hosts: `127.0.0.1\tlocalhost\n127.0.1.1\t${SANDBOX_HOSTNAME}\n`,
  hostname: `${SANDBOX_HOSTNAME}\n`,
  'nsswitch.conf':
    'passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n',
};

/**
 * Builds `<dataDir>/images/base-etc` once (again after a version bump); returns its path. Its files are read by
 * every sandbox's uid, so they are made world-readable whatever the server's umask (which keeps its other files
 * private).
 */
export function ensureBaseEtc(dataDir: string, hostEtc = '/etc'): string {
  const previous = process.umask(0o022);
  try {
    return buildBaseEtc(dataDir, hostEtc);
  } finally {
    process.umask(previous);
  }
}

function buildBaseEtc(dataDir: string, hostEtc: string): string {
  const images = join(dataDir, 'images');
  const target = join(images, 'base-etc');
  const marker = join(target, '.berth-version');
  if (existsSync(marker) && readFileSync(marker, 'utf8') === BASE_ETC_VERSION) {
    writeResolvConf(target, hostEtc);
    return target;
  }
  mkdirSync(images, { recursive: true, mode: 0o755 });
  const tmp = join(images, `.base-etc-${process.pid}-${Date.now()}`);
  mkdirSync(tmp, { mode: 0o755 });
  for (const rel of COPIED_ETC) {
    const src = join(hostEtc, rel);
    if (!existsSync(src) && !isSymlink(src)) continue;
    mkdirSync(join(tmp, rel, '..'), { recursive: true });
    cpSync(src, join(tmp, rel), { recursive: true, verbatimSymlinks: true, dereference: false });
  }
  for (const [name, text] of Object.entries(GENERATED_ETC))
    writeFileSync(join(tmp, name), text, { mode: 0o644 });
  writeResolvConf(tmp, hostEtc);
  writeFileSync(join(tmp, '.berth-version'), BASE_ETC_VERSION);
  if (existsSync(target)) rmSync(target, { recursive: true, force: true });
  try {
    renameSync(tmp, target);
  } catch {
    rmSync(tmp, { recursive: true, force: true }); // another server built it at the same moment
  }
  return target;
}

/**
 * The host's resolvers, refreshed at every start (written in place, so running sandboxes see it too).
 * A loopback resolver (systemd-resolved's 127.0.0.53) would be the sandbox's own lo in its network
 * namespace; then the upstream list systemd-resolved keeps is used instead, as container engines do.
 */
function writeResolvConf(etc: string, hostEtc: string): void {
  const text = sandboxResolvConf(hostEtc);
  const p = join(etc, 'resolv.conf');
  if (isSymlink(p)) rmSync(p); // never write through a link
  if (readText(p) !== text) writeFileSync(p, text, { mode: 0o644 });
}

const readText = (p: string) => (existsSync(p) ? readFileSync(p, 'utf8') : '');
const nameservers = (text: string) => [...text.matchAll(/^nameserver\s+(\S+)/gm)].map((m) => m[1]);

function sandboxResolvConf(hostEtc: string): string {
  const text = readText(join(hostEtc, 'resolv.conf'));
  const servers = nameservers(text);
  if (servers.length && servers.every((a) => a.startsWith('127.') || a === '::1'))
    return readText('/run/systemd/resolve/resolv.conf') || text;
  return text;
}

/** The resolvers sandboxes are given: the network rules let them through even in a private range. */
export function sandboxResolvers(hostEtc = '/etc'): string[] {
  return nameservers(sandboxResolvConf(hostEtc));
}

function isSymlink(p: string): boolean {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

/** One top-level entry of the sandbox root. */
export type RootEntry =
  | { kind: 'symlink'; target: string; dest: string }
  | { kind: 'bind'; src: string; dest: string; readOnly: boolean };

/** Top-level names the runtime provides itself, never taken from an image. */
const RUNTIME_OWNED = new Set([
  'proc',
  'dev',
  'sys',
  'tmp',
  'home',
  'var',
  'workspace',
  'run',
  'etc',
  'root',
]);
/** Inside an image root: where the host's /usr appears, for the API daemon only (see hostUserland). */
export const HOST_USR_BIND = '/opt/berth-host';
/** Files of base-etc bound over an image's own /etc: they describe this host and this sandbox, not the image. */
const HOST_ETC_FILES = ['hosts', 'hostname', 'resolv.conf'];

/**
 * The read-only part of the root for an image from the store (runtime/images): its top-level directories and
 * links, its own /etc with Berth's hosts, hostname and resolv.conf bound over, and the host's /usr at
 * HOST_USR_BIND (the daemon runs from there whatever libc the image has). `rootfs` must be reachable by the
 * sandbox's uid (host.ts exposeDir); the image store built it with the mount points bwrap needs (root-layout.ts).
 */
export function ociRoot(rootfs: string, baseEtc: string): RootEntry[] {
  const out: RootEntry[] = [];
  for (const name of readdirSync(rootfs)) {
    if (RUNTIME_OWNED.has(name)) continue;
    const p = join(rootfs, name);
    const st = lstatSync(p);
    if (st.isSymbolicLink()) out.push({ kind: 'symlink', target: readlinkSync(p), dest: `/${name}` });
    else if (st.isDirectory()) out.push({ kind: 'bind', src: p, dest: `/${name}`, readOnly: true });
  }
  out.push({ kind: 'bind', src: join(rootfs, 'etc'), dest: '/etc', readOnly: true });
  for (const f of HOST_ETC_FILES)
    out.push({ kind: 'bind', src: join(baseEtc, f), dest: `/etc/${f}`, readOnly: true });
  out.push({ kind: 'bind', src: '/usr', dest: HOST_USR_BIND, readOnly: true });
  return out;
}

/**
 * How the daemon starts inside an image root: the host's programs under HOST_USR_BIND, run by the host's loader
 * (an execute-only copy, nodump.ts) with the host's library directories given on its command line, not in the
 * environment, so nothing the daemon starts inherits them and the image's programs keep their own libc.
 */
export function hostUserland(hostUsr = '/usr'): {
  shell: string;
  loaderArgs: string[];
  rebase: (p: string) => string;
} {
  const libs = ['lib/x86_64-linux-gnu', 'lib/aarch64-linux-gnu', 'lib64', 'lib']
    .filter((d) => existsSync(join(hostUsr, d)))
    .map((d) => `${HOST_USR_BIND}/${d}`);
  const rebase = (p: string) => (p.startsWith('/usr/') ? `${HOST_USR_BIND}/${p.slice(5)}` : p);
  return { shell: `${HOST_USR_BIND}/bin/sh`, loaderArgs: ['--library-path', libs.join(':')], rebase };
}

/** The read-only part of the root for the default image: the host's own userland and the curated /etc. */
export function hostRoot(baseEtc: string): RootEntry[] {
  const out: RootEntry[] = [{ kind: 'bind', src: '/usr', dest: '/usr', readOnly: true }];
  // Merged-/usr hosts have /bin, /lib... as symlinks into /usr; older layouts have real directories.
  for (const name of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
    const p = `/${name}`;
    if (isSymlink(p)) out.push({ kind: 'symlink', target: readlinkSync(p), dest: p });
    else if (existsSync(p)) out.push({ kind: 'bind', src: p, dest: p, readOnly: true });
  }
  out.push({ kind: 'bind', src: baseEtc, dest: '/etc', readOnly: true });
  return out;
}
