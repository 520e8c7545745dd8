// The sandbox's root file system (decision 051): the whole image (the host's own /usr with a curated /etc by default,
// or an image from the store) as the lower layers of an overlay whose upper is the sandbox's capped writable layer.
import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';

/** Bumped whenever the list below changes, so an old base-etc is rebuilt. */
const BASE_ETC_VERSION = '4';
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
 * Builds `<dataDir>/images/host-root` once (again after a version bump) and returns its `etc`: the default image's
 * root below the host's /usr, a lower layer of every default-image sandbox (rootfsPlan). Its files are read by every
 * sandbox's uid, so they are made world-readable whatever the server's umask (which keeps its other files private).
 */
export function ensureBaseEtc(dataDir: string, hostEtc = '/etc'): string {
  const previous = process.umask(0o022);
  try {
    return join(buildHostRoot(dataDir, hostEtc), 'etc');
  } finally {
    process.umask(previous);
  }
}

/** The default image's root: the curated /etc, the host's top-level links into /usr, and directories to write in. */
function buildHostRoot(dataDir: string, hostEtc: string): string {
  const images = join(dataDir, 'images');
  const target = join(images, 'host-root');
  const marker = join(target, 'etc', '.berth-version');
  if (existsSync(marker) && readFileSync(marker, 'utf8') === BASE_ETC_VERSION) {
    writeResolvConf(join(target, 'etc'), hostEtc);
    return target;
  }
  mkdirSync(images, { recursive: true, mode: 0o755 });
  rmSync(join(images, 'base-etc'), { recursive: true, force: true }); // the layout before decision 051
  const tmp = join(images, `.host-root-${process.pid}-${Date.now()}`);
  const etc = join(tmp, 'etc');
  mkdirSync(etc, { recursive: true, mode: 0o755 });
  for (const rel of COPIED_ETC) {
    const src = join(hostEtc, rel);
    if (!existsSync(src) && !isSymlink(src)) continue;
    mkdirSync(join(etc, rel, '..'), { recursive: true });
    cpSync(src, join(etc, rel), { recursive: true, verbatimSymlinks: true, dereference: false });
  }
  for (const [name, text] of Object.entries(GENERATED_ETC))
    writeFileSync(join(etc, name), text, { mode: 0o644 });
  writeResolvConf(etc, hostEtc);
  for (const d of HOST_ROOT_DIRS) mkdirSync(join(tmp, d.path), { recursive: true, mode: d.mode });
  for (const d of HOST_ROOT_DIRS) chmodSync(join(tmp, d.path), d.mode);
  // Merged-/usr hosts have /bin, /lib... as symlinks into /usr; a real directory of an older layout is overlaid.
  for (const name of HOST_TOP_DIRS) {
    const p = `/${name}`;
    if (isSymlink(p)) symlinkSync(readlinkSync(p), join(tmp, name));
    else if (existsSync(p)) mkdirSync(join(tmp, name), { mode: 0o755 });
  }
  writeFileSync(marker.replace(target, tmp), BASE_ETC_VERSION);
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

/** Host top-level directories of the host userland: a symlink into /usr (merged /usr), or a directory overlaid. */
const HOST_TOP_DIRS = ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32'];
/** Directories of the default image's own (the host's are not shown): where programs expect to write. */
const HOST_ROOT_DIRS = [
  { path: 'usr', mode: 0o755 },
  { path: 'root', mode: 0o700 },
  { path: 'var/tmp', mode: 0o1777 },
  { path: 'var/log', mode: 0o755 },
  { path: 'var/cache', mode: 0o755 },
  { path: 'var/lib', mode: 0o755 },
];

/**
 * The init layer (as Docker calls its own): the mount points of everything the runtime puts into a sandbox's root,
 * lying between the image and the sandbox's writable layer, so that bubblewrap finds them all and creates nothing in
 * the writable layer (a build reads that layer back as the image's changes: it must hold the user's writes only).
 * Its directories merge with the image's (the image's /home/node, /var/www, /etc stay visible).
 */
const INIT_LAYER_VERSION = '1';
const INIT_DIRS = [
  { path: 'dev', mode: 0o755 },
  { path: 'proc', mode: 0o555 },
  { path: 'run/berth', mode: 0o755 },
  { path: 'tmp', mode: 0o1777 },
  { path: 'home/user', mode: 0o755 },
  { path: 'workspace', mode: 0o755 },
  { path: 'opt/berth', mode: 0o755 },
  { path: 'opt/berth-bin', mode: 0o755 },
  { path: 'opt/berth-host', mode: 0o755 },
  { path: 'opt/node_modules', mode: 0o755 },
  { path: 'node_modules', mode: 0o755 },
  { path: 'etc', mode: 0o755 },
];
/** Files of base-etc bound over every root's /etc: they describe this host and this sandbox, not the image. */
export const HOST_ETC_FILES = ['hosts', 'hostname', 'resolv.conf'];

/** Builds `<dataDir>/images/init-layer` once (again after a version bump); returns its path. */
export function ensureInitLayer(dataDir: string): string {
  const target = join(dataDir, 'images', 'init-layer');
  const marker = join(dataDir, 'images', '.init-layer-version');
  if (existsSync(marker) && readFileSync(marker, 'utf8') === INIT_LAYER_VERSION && existsSync(target))
    return target;
  const tmp = `${target}.${process.pid}-${Date.now()}`;
  mkdirSync(tmp, { recursive: true, mode: 0o755 });
  chmodSync(tmp, 0o755);
  for (const d of INIT_DIRS) {
    mkdirSync(join(tmp, d.path), { recursive: true, mode: 0o755 });
    chmodSync(join(tmp, d.path), d.mode);
  }
  for (const d of ['run', 'home', 'opt']) chmodSync(join(tmp, d), 0o755);
  for (const f of HOST_ETC_FILES) writeFileSync(join(tmp, 'etc', f), '', { mode: 0o644 });
  rmSync(target, { recursive: true, force: true });
  renameSync(tmp, target);
  writeFileSync(marker, INIT_LAYER_VERSION);
  return target;
}

/** Inside an image root: where the host's /usr appears, for the API daemon only (see hostUserland). */
export const HOST_USR_BIND = '/opt/berth-host';

/** One overlay of a sandbox's root: where it is mounted (relative to the root), and its lowers, topmost first. */
export interface RootOverlay {
  /** '' for the root itself, else a directory inside it ('usr'). */
  target: string;
  /** Its directory in the sandbox's writable layer (`ovl/<name>/upper`). */
  name: string;
  lowers: string[];
}

/** A bind mount over the root: a file of base-etc, or the host's /usr for the daemon in an image root. */
export interface RootBind {
  src: string;
  dest: string;
}

/** The sandbox root's overlays (the writable layer on top of each) and what is bound over them. */
export interface RootPlan {
  overlays: RootOverlay[];
  binds: RootBind[];
}

/**
 * The root of a sandbox (decision 051): the whole image, written over in the sandbox's own capped layer.
 * - The default image: the init layer and the host root (etc, top-level links) with the host's /usr (and any real
 *   top-level directory of an older layout) overlaid at its place, each writable on top.
 * - An image of the store: the init layer, `layers` (a build's steps, topmost first), then the image's root.
 * Berth's hosts, hostname and resolv.conf are bound over /etc in both; an image root gets the host's /usr at
 * HOST_USR_BIND, for the API daemon (hostUserland).
 */
export function rootfsPlan(opts: {
  initLayer: string;
  /** The default image's root (ensureBaseEtc's parent); used when `image` is undefined. */
  hostRoot: string;
  /** The view of base-etc the /etc files are bound from. */
  etcView: string;
  image?: { rootfs: string; layers?: string[] };
  /** Snapshot layers (decision 053), topmost first: each overlay takes its own subdirectory of each, under the init layer. */
  snapshotLayers?: string[];
}): RootPlan {
  const binds = HOST_ETC_FILES.map((f) => ({ src: join(opts.etcView, f), dest: `/etc/${f}` }));
  const snap = (name: string) =>
    (opts.snapshotLayers ?? []).map((l) => join(l, name)).filter((d) => existsSync(d));
  if (opts.image) {
    const { rootfs, layers = [] } = opts.image;
    return {
      overlays: [{ target: '', name: 'root', lowers: [opts.initLayer, ...snap('root'), ...layers, rootfs] }],
      binds: [...binds, { src: '/usr', dest: HOST_USR_BIND }],
    };
  }
  const overlays: RootOverlay[] = [
    { target: '', name: 'root', lowers: [opts.initLayer, ...snap('root'), opts.hostRoot] },
  ];
  for (const name of ['usr', ...HOST_TOP_DIRS]) {
    const p = `/${name}`;
    if (name === 'usr' || (!isSymlink(p) && existsSync(p) && lstatSync(p).isDirectory()))
      overlays.push({ target: name, name, lowers: [...snap(name), p] });
  }
  return { overlays, binds };
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
