// What of a daemon's log an event quotes: a sandbox that stopped, a replica that crashed (controllers/sandbox,
// controllers/workload), and `berth debug`.

/** Lines of a daemon's log worth showing: the last few, without its start-up line, each kept short. */
export function lastOutput(log: string | undefined, lines = 3): string | undefined {
  const kept = (log ?? '')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !/^\{"event":"listening"/.test(l))
    .slice(-lines)
    .map((l) => (l.length > 200 ? `${l.slice(0, 200)}…` : l));
  return kept.length ? kept.join(' | ') : undefined;
}
