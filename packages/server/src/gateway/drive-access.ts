// Who may mount a drive, and how: the SDK's drive permissions. None (or an empty list): every sandbox of the
// workspace, read-write, all of the drive. Otherwise a permission grants when the sandbox has ALL its labels;
// the first one that grants the asked directory and mode wins (OR); none does → the request is refused (403).
import { posix } from 'node:path';

export interface DrivePermission {
  labels?: Record<string, unknown>;
  mode?: 'read' | 'read-write';
  path?: string;
}

/** Is `dir` the directory `root` or under it (both absolute and normalized)? */
const within = (dir: string, root: string) =>
  root === '/' || dir === root || dir.startsWith(`${root.replace(/\/+$/, '')}/`);

/** Why the sandbox may not mount `drivePath` this way, or undefined when a permission grants it. */
export function driveAccessRefusal(
  permissions: DrivePermission[] | undefined,
  sandboxLabels: Record<string, unknown> | undefined,
  drivePath: string,
  readOnly: boolean,
): string | undefined {
  if (!permissions?.length) return undefined;
  const labels = sandboxLabels ?? {};
  const matching = permissions.filter((p) =>
    Object.entries(p.labels ?? {}).every(([k, v]) => k in labels && String(labels[k]) === String(v)),
  );
  // "permission denied" leads each refusal: the words the service's SDK and its users look for in a refused mount.
  if (!matching.length)
    return "permission denied: the sandbox's labels match none of the drive's permissions";
  const reaching = matching.filter((p) => within(drivePath, posix.normalize(p.path ?? '/')));
  if (!reaching.length)
    return `permission denied: the drive's permissions for this sandbox do not reach ${JSON.stringify(drivePath)}`;
  if (readOnly || reaching.some((p) => (p.mode ?? 'read-write') === 'read-write')) return undefined;
  return 'permission denied: the drive grants this sandbox read access only: mount it with readOnly: true';
}
