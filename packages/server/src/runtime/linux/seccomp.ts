// A classic-BPF seccomp filter, assembled here so no libseccomp or compiler is needed at install time.
// bubblewrap loads it (--seccomp FD) just before it execs the sandbox's first process.
import { type SyscallTable, syscallTable } from './syscalls.js';

const EPERM = 1;
const ENOSYS = 38;
const CLONE_NEWUSER = 0x10000000;
const TIOCSTI = 0x5412;
const TIOCLINUX = 0x541c;

/** Denied outright: kernel-wide state, module and key management, mounts, raw handles, tracing. */
const DENY_EPERM = [
  'keyctl',
  'add_key',
  'request_key',
  'bpf',
  'perf_event_open',
  'userfaultfd',
  'kexec_load',
  'kexec_file_load',
  'init_module',
  'finit_module',
  'delete_module',
  'reboot',
  'swapon',
  'swapoff',
  'acct',
  'open_by_handle_at',
  'name_to_handle_at',
  'lookup_dcookie',
  'quotactl',
  'quotactl_fd',
  'mount',
  'umount2',
  'pivot_root',
  'move_mount',
  'open_tree',
  'fsopen',
  'fsconfig',
  'fsmount',
  'fspick',
  'mount_setattr',
  'setns',
  'syslog',
  'vhangup',
  'iopl',
  'ioperm',
  'modify_ldt',
  'uselib',
  '_sysctl',
  'nfsservctl',
  'fanotify_init',
  'clock_settime',
  'clock_adjtime',
  'settimeofday',
  'adjtimex',
];

/**
 * "Not implemented" so callers fall back cleanly: io_uring (a large kernel surface; libuv and others
 * fall back to threads), clone3 (its flags sit behind a pointer seccomp cannot read, so libc must
 * use clone, whose flags the filter checks) and pidfd_send_signal (it also takes an fd of /proc/<pid>,
 * so its target cannot be checked here; callers such as Go's runtime fall back to kill, which is).
 */
const DENY_ENOSYS = ['io_uring_setup', 'io_uring_enter', 'io_uring_register', 'clone3', 'pidfd_send_signal'];

interface ArgRule {
  syscall: string;
  arg: number;
  /** 'set': any of the bits in value is set; 'eq': the low 32 bits equal value. */
  test: 'set' | 'eq';
  values: number[];
}

/**
 * pid 1 (the sandbox's init) and pid 2 (the API daemon it starts first) as seen inside the sandbox's pid
 * namespace, and -1 (every process the caller may signal). Same uid as user code, so only this filter keeps
 * user code from signalling them or taking a pidfd on them (docs/decisions/015-sandbox-containment.md).
 */
const PROTECTED_PIDS = [1, 2];
const ALL_PROCESSES = 0xffffffff; // (pid_t)-1, low 32 bits

const ARG_RULES: ArgRule[] = [
  ...['kill', 'tkill', 'tgkill', 'rt_sigqueueinfo', 'rt_tgsigqueueinfo'].map(
    (syscall): ArgRule => ({ syscall, arg: 0, test: 'eq', values: [...PROTECTED_PIDS, ALL_PROCESSES] }),
  ),
  { syscall: 'pidfd_open', arg: 0, test: 'eq', values: PROTECTED_PIDS },
  // Nested user namespaces are the usual first step of a kernel escape (bwrap --disable-userns also applies).
  { syscall: 'unshare', arg: 0, test: 'set', values: [CLONE_NEWUSER] },
  { syscall: 'clone', arg: 0, test: 'set', values: [CLONE_NEWUSER] },
  // Pushing input into another terminal's queue.
  { syscall: 'ioctl', arg: 1, test: 'eq', values: [TIOCSTI, TIOCLINUX] },
];

// BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const JSET_K = 0x45;
const RET_K = 0x06;
export const RET_ALLOW = 0x7fff0000;
export const RET_KILL_PROCESS = 0x80000000;
export const retErrno = (errno: number) => 0x00050000 | errno;
const OFF_NR = 0;
const OFF_ARCH = 4;
/** Low 32 bits of args[i] (little-endian seccomp_data). */
const offArg = (i: number) => 16 + 8 * i;

export interface Insn {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

const ins = (code: number, k: number, jt = 0, jf = 0): Insn => ({ code, jt, jf, k });

export function buildFilter(table: SyscallTable): Insn[] {
  const p: Insn[] = [
    ins(LD_W_ABS, OFF_ARCH),
    ins(JEQ_K, table.auditArch, 1, 0),
    ins(RET_K, RET_KILL_PROCESS),
    ins(LD_W_ABS, OFF_NR),
  ];
  if (table.foreignAbiFrom) p.push(ins(JGE_K, table.foreignAbiFrom, 0, 1), ins(RET_K, retErrno(ENOSYS)));
  const deny = (names: string[], errno: number) => {
    for (const name of names) {
      const nr = table.nr[name];
      if (nr === undefined) continue;
      p.push(ins(JEQ_K, nr, 0, 1), ins(RET_K, retErrno(errno)));
    }
  };
  deny(DENY_EPERM, EPERM);
  deny(DENY_ENOSYS, ENOSYS);
  for (const rule of ARG_RULES) {
    const nr = table.nr[rule.syscall];
    if (nr === undefined) continue;
    const m = rule.values.length;
    // Not this syscall: skip the whole block (A still holds nr). Else test, deny, and reload nr.
    p.push(ins(JEQ_K, nr, 0, m + 3), ins(LD_W_ABS, offArg(rule.arg)));
    rule.values.forEach((v, i) => {
      const last = i === m - 1;
      p.push(ins(rule.test === 'set' ? JSET_K : JEQ_K, v, last ? 0 : m - 1 - i, last ? 1 : 0));
    });
    p.push(ins(RET_K, retErrno(EPERM)), ins(LD_W_ABS, OFF_NR));
  }
  p.push(ins(RET_K, RET_ALLOW));
  return p;
}

/** struct sock_filter[] as the kernel reads it (host byte order; both supported arches are little-endian). */
export function encodeFilter(program: Insn[]): Buffer {
  const buf = Buffer.alloc(program.length * 8);
  program.forEach((x, i) => {
    buf.writeUInt16LE(x.code, i * 8);
    buf.writeUInt8(x.jt, i * 8 + 2);
    buf.writeUInt8(x.jf, i * 8 + 3);
    buf.writeUInt32LE(x.k >>> 0, i * 8 + 4);
  });
  return buf;
}

export type SeccompResult = { ok: true; bpf: Buffer } | { ok: false; reason: string };

export function seccompFilterForHost(arch: string = process.arch): SeccompResult {
  const table = syscallTable(arch);
  if (!table) return { ok: false, reason: `no syscall table for architecture ${arch}` };
  return { ok: true, bpf: encodeFilter(buildFilter(table)) };
}
