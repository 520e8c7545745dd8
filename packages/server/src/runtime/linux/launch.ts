// Starts a sandbox: a detached process chain  sh (joins the cgroups) → nsenter (joins the netns)
// → setpriv (drops to the sandbox's unprivileged host uid) → bwrap (namespaces, mounts, seccomp)
// → pid 1 (a reaping shell) → the sandbox API daemon, both non-dumpable (nodump.ts). Every step up to
// bwrap is an exec in the same pid, so the cgroups are joined before bwrap or the payload can fork: no
// process ever escapes the limits, and no pid has to be written after the fact. The chain runs in its
// own session with stdio on a pipe to a capped logger, so it outlives the server (a crash or kill -9 of
// `berth serve` leaves sandboxes running for re-adoption).
import {
  closeSync,
  constants,
  fstatSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { basename, join } from 'node:path';
import { request } from 'node:http';
import { connect } from 'node:net';
import { hostTools, sleep } from './exec.js';
import type { RootBind } from './rootfs.js';
import { SANDBOX_HOSTNAME } from './rootfs.js';
import { isProcessAlive } from './state.js';
import { EMPTY_DIR, EMPTY_FILE } from './host.js';
import { NODUMP_DIR } from './nodump.js';

/** Inside the sandbox: the loader copies of NODUMP_DIR (execute-only; only known names can be run). */
const NODUMP_BIND = '/opt/berth-bin';

export const SANDBOX_SOCKET_DIR = '/run/berth';
export const SANDBOX_SOCKET = `${SANDBOX_SOCKET_DIR}/api.sock`;
/** The daemon's stdout and stderr reach its log file through a host-side logger that keeps this much of it. */
export const DAEMON_LOG_CAP_BYTES = 1024 * 1024;
/**
 * pid 1 of a sandbox: starts the daemon on the logger's pipe, lets go of that pipe itself (a write after the
 * logger has stopped would be a SIGPIPE, and pid 1's death ends the sandbox), reaps every orphan while it waits
 * (dash's `wait` collects any child, known job or not), and ends when the daemon does, as bwrap's own did.
 * The umask is the conventional 022: the server's own is 077 (its data dir), and a sandbox must not inherit it.
 */
const INIT_SCRIPT = 'umask 022; "$@" & exec > /dev/null 2>&1; wait';
/**
 * Entries of /proc hidden from a sandbox (an empty read-only file or directory bound over each): runc's and Docker's
 * default masked paths (sound cards, ACPI, SCSI, the kernel's memory image and keys, timer and scheduler debug
 * listings, latency statistics) and the host's interrupt counts (which Docker added with advisory
 * GHSA-6fw5-f8r9-fgfm: a side channel on what the rest of the host does), plus the kernel's command line and build configuration, which describe this host
 * (boot options, addresses and tokens some boot setups pass there) and nothing about the sandbox. Docker's
 * read-only paths (/proc/sys, /proc/sysrq-trigger, /proc/irq, /proc/bus, /proc/fs) need nothing here: they belong
 * to the host's root, which the sandbox's user namespace does not map, so nothing inside can write them.
 */
export const MASKED_PROC = [
  'acpi',
  'asound',
  'cmdline',
  'config.gz',
  'interrupts',
  'kcore',
  'keys',
  'latency_stats',
  'sched_debug',
  'scsi',
  'timer_list',
  'timer_stats',
];

/** The masks that apply on this kernel (bwrap cannot bind over an entry that does not exist): path and kind. */
let procMasks: Array<{ path: string; dir: boolean }> | undefined;
function masksHere(): Array<{ path: string; dir: boolean }> {
  procMasks ??= MASKED_PROC.flatMap((name) => {
    const st = statSync(`/proc/${name}`, { throwIfNoEntry: false });
    return st ? [{ path: `/proc/${name}`, dir: st.isDirectory() }] : [];
  });
  return procMasks;
}

const NODE_MODULES_TARGETS = ['/opt/node_modules', '/node_modules'];

export interface LaunchPlan {
  id: string;
  netnsPath: string;
  hostUid: number;
  cgroupProcs: string[];
  /** The sandbox's root, mounted on the host (views.ts mountRoot): the image under its writable layer. */
  root: string;
  /** Bound read-only over the root; every source must be reachable by the sandbox's uid (see host.ts exposeDir). */
  binds: RootBind[];
  /** Host directory bound at /run/berth; the daemon creates its socket there. */
  runDir: string;
  /** The server's built code, bound read-only at /opt/berth. */
  codeDir: string;
  /** Its dependencies, nearest first, bound read-only at /opt/node_modules then /node_modules: the
   *  two places Node's resolution looks from /opt/berth/... after the code's own directories. */
  nodeModulesDirs: string[];
  seccompFile?: string;
  env: Record<string, string>;
  command: string[];
  /**
   * Execute-only loader copies on the host (nodump.ts) for the init and for the command's first program. When
   * both are set the sandbox's pid 1 is a shell reaping orphans and the daemon its child, both non-dumpable.
   */
  loaders?: { init: string; command: string };
  /**
   * For an image root: pid 1's shell (the host's, under rootfs.ts HOST_USR_BIND) and the loader's own options
   * (the host's library directories) put before the init's and the command's program. Absent for the host root.
   */
  hostUserland?: { shell: string; loaderArgs: string[] };
  /**
   * The uid and gid everything in the sandbox runs as (its one mapped id; root by default): an image's User.
   * The sandbox's host uid stays the same, so this changes only the name processes see.
   */
  user?: { uid: number; gid: number };
  logFile: string;
}

/** Builds bwrap's options (not the command, which bwrap 0.8 wants on argv). */
export function bwrapArgs(plan: LaunchPlan, passFd: (path: string) => number): string[] {
  const a = [
    '--unshare-user',
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    '--disable-userns',
    '--uid',
    String(plan.user?.uid ?? 0),
    '--gid',
    String(plan.user?.gid ?? 0),
    '--hostname',
    SANDBOX_HOSTNAME,
    '--cap-drop',
    'ALL',
    '--new-session',
  ];
  // Our own reaper as pid 1 (below), so that pid 1 is non-dumpable too: bubblewrap's reaper is not.
  if (plan.loaders) a.push('--as-pid-1');
  const bind = (src: string, dest: string, readOnly: boolean) =>
    a.push(readOnly ? '--ro-bind' : '--bind', src, dest);
  // The whole image, writable on top: every write lands in the sandbox's capped layer (decision 051). Every mount
  // point below is in the root's init layer (rootfs.ts), so bubblewrap creates nothing in what the sandbox wrote.
  bind(plan.root, '/', false);
  a.push('--proc', '/proc');
  for (const m of masksHere()) bind(m.dir ? EMPTY_DIR : EMPTY_FILE, m.path, true);
  a.push('--dev', '/dev');
  for (const b of plan.binds) bind(b.src, b.dest, true);
  bind(plan.runDir, SANDBOX_SOCKET_DIR, false);
  bind(plan.codeDir, '/opt/berth', true);
  plan.nodeModulesDirs.slice(0, NODE_MODULES_TARGETS.length).forEach((dir, i) => {
    bind(dir, NODE_MODULES_TARGETS[i], true);
  });
  if (plan.loaders) bind(NODUMP_DIR, NODUMP_BIND, true);
  a.push('--chdir', '/home/user');
  // Read from an fd opened by root: the filter file may sit in a private data dir.
  if (plan.seccompFile) a.push('--seccomp', String(passFd(plan.seccompFile)));
  a.push('--clearenv');
  for (const [k, v] of Object.entries(plan.env)) a.push('--setenv', k, v);
  return a;
}

/** Child fd numbers (the layout of a detached start, exec-child.ts): 0-2 stdio, 3 carries bwrap's options, 4..
 *  files bwrap reads (the filter). */
const ARGS_FD = 3;
const FIRST_PASSED_FD = 4;

/**
 * The root wrapper: joins the sandbox's cgroups, starts the host-side logger, puts its own stdout and stderr on
 * the logger's pipe (a FIFO in the state dir, removed once both ends are open) and execs the chain. The logger is
 * forked by this small shell rather than by the server, whose fork costs more; it is in the sandbox's cgroups
 * (its ~0.13 MB are the sandbox's, removal kills it, a server restart does not), under the sandbox's uid, in the
 * host's pid namespace where nothing inside can name it, and holds none of the chain's extra descriptors. It
 * keeps the first DAEMON_LOG_CAP_BYTES and exits; the daemon's later writes fail with EPIPE, which it ignores.
 * The sandbox only ever holds the pipe's write end: no host file is open in it. stdbuf because head's stdio would
 * hold the output until it exits (dd stops early on a pipe's short reads).
 */
const WRAPPER = [
  'IFS=:; for f in $BERTH_CGROUP_PROCS; do echo $$ > "$f" || exit 125; done; unset BERTH_CGROUP_PROCS',
  'rm -f "$BERTH_LOG_FIFO"; mkfifo -m 600 "$BERTH_LOG_FIFO" || exit 125',
  'setpriv --reuid="$BERTH_LOG_UID" --regid="$BERTH_LOG_UID" --clear-groups --no-new-privs -- ' +
    'stdbuf -o0 head -c "$BERTH_LOG_CAP" < "$BERTH_LOG_FIFO" 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&- &',
  'exec > "$BERTH_LOG_FIFO" 2>&1',
  'rm -f "$BERTH_LOG_FIFO"; unset BERTH_LOG_FIFO BERTH_LOG_UID BERTH_LOG_CAP',
  'exec "$@"',
].join('\n');

/** The command as bwrap runs it: through the loader copies and our pid 1 when the plan has them. */
export function sandboxCommand(plan: Pick<LaunchPlan, 'command' | 'loaders' | 'hostUserland'>): string[] {
  if (!plan.loaders) return plan.command;
  const inside = (hostPath: string) => `${NODUMP_BIND}/${basename(hostPath)}`;
  const pre = plan.hostUserland?.loaderArgs ?? [];
  return [
    inside(plan.loaders.init),
    ...pre,
    plan.hostUserland?.shell ?? '/bin/sh',
    '-c',
    INIT_SCRIPT,
    'berth-init',
    inside(plan.loaders.command),
    ...pre,
    ...plan.command,
  ];
}

/**
 * Spawns the chain and returns bwrap's host pid (the same pid as the wrapper: each step execs). The host-tool
 * process spawns it (exec.ts: a fork of the server would hold its event loop) and is its parent; the chain runs in
 * its own session, so it outlives that process as it outlives the server.
 */
export async function launch(plan: LaunchPlan): Promise<number> {
  const files: string[] = [];
  const passFd = (path: string) => {
    files.push(path);
    return FIRST_PASSED_FD + files.length - 1;
  };
  const env = {
    PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
    BERTH_CGROUP_PROCS: plan.cgroupProcs.join(':'),
    BERTH_LOG_FIFO: `${plan.logFile}.pipe`,
    BERTH_LOG_UID: String(plan.hostUid),
    BERTH_LOG_CAP: String(DAEMON_LOG_CAP_BYTES),
  };
  const uid = String(plan.hostUid);
  // Options travel through an fd, not argv: envs may hold secrets and argv is world-readable.
  const args = bwrapArgs(plan, passFd);
  for (const s of args) if (s.includes('\0')) throw new Error('sandbox arguments may not contain NUL bytes');
  return hostTools.startDetached({
    cmd: '/bin/sh',
    args: [
      '-c',
      WRAPPER,
      'berth-launch',
      'nsenter',
      `--net=${plan.netnsPath}`,
      '--',
      'setpriv',
      `--reuid=${uid}`,
      `--regid=${uid}`,
      '--clear-groups',
      '--no-new-privs',
      '--',
      'bwrap',
      '--args',
      String(ARGS_FD),
      '--',
      ...sandboxCommand(plan),
    ],
    env,
    logFile: plan.logFile,
    files,
    data: args.map((s) => `${s}\0`).join(''),
  });
}

/**
 * Waits for the daemon's socket in the sandbox's run dir, hard-links it into `linkDir` (a root-only directory of
 * the same layer, which the sandbox never sees), points `socketPath` (in a directory the sandbox cannot write) at
 * that link, then waits until it accepts connections. The server connects as root, and the run dir belongs to
 * the sandbox, which could swap its socket for a symlink to any socket on the host; the link names the socket
 * inode itself (link(2) never follows a symlink, and the result is checked). A link, not a rename, because the
 * daemon still uses its own path (chmod); a symlink from the socket dir, because the layer is another file
 * system (a hard link cannot cross it).
 */
export async function waitForSocket(
  runDir: string,
  linkDir: string,
  socketPath: string,
  pid: number,
  pidStart: number,
  logFile: string,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const inner = join(runDir, 'api.sock');
  const held = join(linkDir, 'api.sock');
  let linked = false;
  // Synchronous on purpose: an `lstat` on the layer's tmpfs and a read of `/proc/<pid>/stat` take microseconds, and
  // the same poll through the thread pool cost the event loop more (a worker woken every 2 ms on two busy cores:
  // 0.4-1.2 s per bench against 0.1-0.25 s; decision 078).
  for (;;) {
    if (!linked && isSocket(inner)) {
      mkdirSync(linkDir, { recursive: true, mode: 0o700 });
      rmSync(held, { force: true });
      linkSync(inner, held);
      if (!isSocket(held)) {
        rmSync(held, { force: true });
        throw new Error('the sandbox replaced its API socket during start');
      }
      rmSync(socketPath, { force: true });
      symlinkSync(held, socketPath);
      linked = true;
    }
    if (linked && (await canConnect(socketPath))) return;
    if (!isProcessAlive(pid, pidStart)) throw new Error(`sandbox exited during start: ${logTail(logFile)}`);
    if (Date.now() > deadline)
      throw new Error(`sandbox API did not listen within ${timeoutMs} ms: ${logTail(logFile)}`);
    await sleep(2);
  }
}

function isSocket(p: string): boolean {
  try {
    return lstatSync(p).isSocket();
  } catch {
    return false;
  }
}

/**
 * One `GET /health` over the socket, answered or not (bounded by `timeoutMs`). A pre-started sandbox gets it while
 * it waits in the pool: V8 compiles lazily, and the daemon's first request compiles Node's whole HTTP server path
 * (measured ~2-3 ms of a user's first exec). Sent from here, not by the daemon to itself: the daemon would also
 * compile Node's HTTP client, memory every idle sandbox would keep.
 */
export function pingHealth(socketPath: string, timeoutMs = 2000): Promise<void> {
  return new Promise((resolve) => {
    const req = request({ socketPath, path: '/health', timeout: timeoutMs }, (res) => {
      res.resume();
      res.on('end', resolve);
      res.on('error', () => resolve());
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve());
    req.end();
  });
}

export function canConnect(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(socketPath);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

export function logTail(logFile: string, bytes = 2000): string {
  const text = readTail(logFile, bytes);
  return text === undefined ? '(no log)' : text.trim() || '(empty log)';
}

/** The last `bytes` of a file (read from its end: a daemon's log may hold its whole cap); undefined if none. */
export function readTail(file: string, bytes: number): string | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW);
    const size = fstatSync(fd).size;
    const n = Math.min(size, bytes);
    const buf = Buffer.alloc(n);
    readSync(fd, buf, 0, n, size - n);
    return buf.toString('utf8');
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
