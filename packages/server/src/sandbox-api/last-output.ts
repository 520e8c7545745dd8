// What of a daemon's or an app's log is shown: an event quoting a sandbox that stopped or a replica that crashed
// (controllers/sandbox, controllers/workload), and `berth debug` (api/debug.ts).

/** The daemon's start-up line: it says nothing about why anything ended. */
const START_LINE = /^\{"event":"listening"/;

/** The last `lines` non-empty lines of a log, each cut at `width` characters; `skipStart` drops the start-up line. */
export function lastLines(
  log: string | undefined,
  lines: number,
  width: number,
  skipStart = false,
): string[] {
  return (log ?? '')
    .split('\n')
    .map((l) => l.trimEnd())
    .filter((l) => l.trim() && !(skipStart && START_LINE.test(l.trim())))
    .slice(-lines)
    .map((l) => (l.length > width ? `${l.slice(0, width)}…` : l));
}

/** Lines of a daemon's log worth quoting in an event: the last few, without its start-up line, each kept short. */
export function lastOutput(log: string | undefined, lines = 3): string | undefined {
  const kept = lastLines(log, lines, 200, true).map((l) => l.trim());
  return kept.length ? kept.join(' | ') : undefined;
}
