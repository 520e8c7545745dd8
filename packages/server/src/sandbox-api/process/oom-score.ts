// When a sandbox's memory runs out (the files of its writable layer count toward it), the kernel's out-of-memory
// killer picks, within the sandbox's cgroup, the process with the highest badness: its resident memory plus
// oom_score_adj in thousandths of the limit. The daemon and pid 1 keep the value they were started with (the
// server's, 0 by default); every process the daemon starts is raised to the maximum right after it starts, so the
// kernel ends the user's processes, largest first, before it touches the daemon, whatever their sizes. Raising needs
// no privilege (lowering would need CAP_SYS_RESOURCE, which the server may not hold), and a process may not lower
// itself below what it inherited, so user code can at most bring itself back to the daemon's level. Between a
// child's exec and this write it has the daemon's value.
import { writeFileSync } from 'node:fs';

/** OOM_SCORE_ADJ_MAX: what Kubernetes gives BestEffort pods, the first ones a node ends. */
export const USER_OOM_SCORE_ADJ = 1000;

export function asUserProcess(pid: number | undefined): void {
  if (!pid) return;
  try {
    writeFileSync(`/proc/${pid}/oom_score_adj`, String(USER_OOM_SCORE_ADJ));
  } catch {
    // Gone already, or no /proc (not Linux): nothing to set.
  }
}
