// A status or run state as a coloured pill: green serving, amber on its way, red failed, grey asleep or gone.
const TONE: Record<string, string> = {
  DEPLOYED: 'ok',
  RUNNING: 'ok',
  running: 'ok',
  succeeded: 'ok',
  completed: 'ok',
  SUCCEEDED: 'ok',
  READY: 'ok',
  BUILT: 'info',
  STANDBY: 'info',
  standby: 'info',
  UPLOADING: 'warn',
  BUILDING: 'warn',
  DEPLOYING: 'warn',
  DEACTIVATING: 'warn',
  DELETING: 'warn',
  pending: 'warn',
  queued: 'warn',
  retrying: 'warn',
  cancelling: 'warn',
  FAILED: 'bad',
  failed: 'bad',
  timeout: 'bad',
  TIMEOUT: 'bad',
  error: 'bad',
  killed: 'bad',
  cancelled: 'idle',
  stopped: 'idle',
  TERMINATED: 'idle',
  DEACTIVATED: 'idle',
};
const MOVING = new Set(['warn']);

export function StatusBadge({ status, title }: { status?: string; title?: string }) {
  if (!status) return <span className="muted">—</span>;
  const tone = TONE[status] ?? 'idle';
  return (
    <span className={`badge badge-${tone}${MOVING.has(tone) ? ' pulse' : ''}`} title={title}>
      {status}
    </span>
  );
}
