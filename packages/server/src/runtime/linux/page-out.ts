// Per-process reclaim for deep standby (decision 058, second pass): the user's processes are pushed out to swap and
// the sandbox API daemon stays resident, so the request that wakes a deep sandbox does not first wait for the
// daemon to page back in. process_madvise(MADV_PAGEOUT) (Linux 5.10) does it per process; Node cannot make a
// syscall, and perl's `syscall` can (perl-base is part of every Debian and Ubuntu install), so a few lines of perl
// run by the server (root: it has CAP_SYS_NICE and may ptrace-read every sandbox process) make the call.
import { existsSync, readFileSync } from 'node:fs';
import { run } from './exec.js';

/**
 * Arguments: the memory cgroup path (as /proc/<pid>/cgroup names it), then the pids to page out. Each pid is
 * pinned by a pidfd first and skipped unless it is still in that group: a pid read from the group may have been
 * reused by then (a wake let the process exit), and a host process must not be touched. Each one's mappings (from /proc/<pid>/maps, without the kernel's special ones,
 * which the call refuses) go in batches of 512 iovecs (under IOV_MAX); a batch the kernel refuses is retried one
 * range at a time, so one odd mapping costs only itself. Prints the bytes advised. x86_64 and aarch64 share the
 * numbers of both calls (pidfd_open 434, process_madvise 440); MADV_PAGEOUT is 21.
 */
const PAGE_OUT_SCRIPT = String.raw`
use strict; no warnings 'portable';
my $group = shift @ARGV;
my $total = 0;
for my $pid (@ARGV) {
  my $fd = syscall(434, $pid + 0, 0);
  next if $fd < 0;
  open(my $cg, '<', "/proc/$pid/cgroup") or next;
  my $in = grep { /^\d+:memory:\Q$group\E$/ } <$cg>;
  close $cg;
  next unless $in;
  open(my $maps, '<', "/proc/$pid/maps") or next;
  my @r;
  while (<$maps>) {
    my ($s, $e, $name) = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/ or next;
    next if $name =~ /^\[(vvar|vvar_vclock|vsyscall|vdso)\]/;
    push @r, [hex($s), hex($e) - hex($s)];
  }
  close $maps;
  while (my @b = splice(@r, 0, 512)) {
    my $n = syscall(440, $fd, pack('Q*', map { @$_ } @b), scalar(@b), 21, 0);
    if ($n >= 0) { $total += $n; next }
    for my $one (@b) { my $k = syscall(440, $fd, pack('Q2', @$one), 1, 21, 0); $total += $k if $k > 0 }
  }
}
print "$total\n";
`;

const PERL = '/usr/bin/perl';

/** Whether per-process page-out can run here (the kernel's call is probed by its first use, not here). */
export function canPageOut(): boolean {
  return (process.arch === 'x64' || process.arch === 'arm64') && existsSync(PERL);
}

/** Pushes out to swap the pages of each process still in `memoryGroup` (e.g. `/berth/sb12`); resolves with the bytes the kernel was advised about. */
export async function pageOut(memoryGroup: string, pids: number[]): Promise<number> {
  if (!pids.length) return 0;
  const out = await run(PERL, ['-e', PAGE_OUT_SCRIPT, memoryGroup, ...pids.map(String)]);
  return Number(out.trim()) || 0;
}

interface ProcStat {
  pid: number;
  ppid: number;
  start: number;
}

function procStat(pid: number): ProcStat | undefined {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The name (field 2) is in parentheses and may hold spaces or parentheses: split after the last ')'.
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return { pid, ppid: Number(f[1]), start: Number(f[19]) };
  } catch {
    return undefined;
  }
}

/**
 * The sandbox API daemon among a sandbox's processes: bubblewrap is the one whose parent is outside the group;
 * its children are the sandbox's pid 1 (Berth's init, or bubblewrap's own reaper when the sandbox runs without
 * the loader copies) and the log capper, and the daemon is the first child pid 1 started (pid 1's other children
 * are orphans of the user's processes, all started after the daemon was up).
 */
export function daemonPid(pids: number[]): number | undefined {
  const stats = pids.map(procStat).filter((s): s is ProcStat => s !== undefined);
  const inGroup = new Set(stats.map((s) => s.pid));
  const roots = new Set(stats.filter((s) => !inGroup.has(s.ppid)).map((s) => s.pid));
  if (roots.size !== 1) return undefined;
  const children = new Set(stats.filter((s) => roots.has(s.ppid)).map((s) => s.pid));
  const grandchildren = stats.filter((s) => children.has(s.ppid));
  grandchildren.sort((a, b) => a.start - b.start || a.pid - b.pid);
  return grandchildren[0]?.pid;
}
