// The configured totals of volume space (per server, per workspace): which volumes count, and whether one more
// fits. A volume whose image exists counts with its full size (images are sparse, but a volume may fill its cap at
// any time, so the promise is the size, not the use): DEPLOYED, deactivated, or deleted but not yet removed, and
// those the caller says it has just made (still DEPLOYING in the store). Drives count in the same totals.
import type { Store, StoredObject } from '../../store/store.js';
import { EVERY_WORKSPACE } from '../../store/store.js';

/** Every object that takes volume space on this server: volumes and drives. */
export async function spaceHolders(store: Store): Promise<StoredObject[]> {
  return [
    ...(await store.list({ workspace: EVERY_WORKSPACE, kind: 'Volume' })),
    ...(await store.list({ workspace: EVERY_WORKSPACE, kind: 'Drive' })),
  ];
}

export interface VolumeCapacity {
  /** MB for every workspace together; undefined: no bound but the disk. */
  totalMb?: number;
  /** MB per workspace; undefined: no per-workspace bound. */
  workspaceMb?: number;
}

const HOLDS_DATA = new Set(['DEPLOYED', 'DEACTIVATING', 'DEACTIVATED', 'DELETING']);

const sizeOf = (vs: StoredObject[]) => vs.reduce((n, v) => n + (v.body.spec?.size ?? 0), 0);

/** MB of volume space `workspace` holds among `volumes` (its volumes and drives whose image exists). */
export const workspaceSpaceMb = (volumes: StoredObject[], workspace: string) =>
  sizeOf(volumes.filter((v) => v.workspace === workspace && HOLDS_DATA.has(v.body.status)));

/** Why `candidate` does not fit beside `volumes` (every volume of the server), or undefined when it does. */
export function capacityRefusal(
  cap: VolumeCapacity,
  volumes: StoredObject[],
  candidate: { kind?: string; workspace: string; name: string; sizeMb: number },
  made: (v: StoredObject) => boolean = () => false,
): string | undefined {
  const others = volumes.filter(
    (v) =>
      (HOLDS_DATA.has(v.body.status) || (v.body.status === 'DEPLOYING' && made(v))) &&
      !(
        v.kind === (candidate.kind ?? 'Volume') &&
        v.workspace === candidate.workspace &&
        v.name === candidate.name
      ),
  );
  if (cap.workspaceMb !== undefined) {
    const used = sizeOf(others.filter((v) => v.workspace === candidate.workspace));
    if (used + candidate.sizeMb > cap.workspaceMb)
      return `volume space of workspace ${JSON.stringify(candidate.workspace)} is full: ${used} MB of ${cap.workspaceMb} MB in use, ${candidate.sizeMb} MB asked`;
  }
  if (cap.totalMb !== undefined) {
    const used = sizeOf(others);
    if (used + candidate.sizeMb > cap.totalMb)
      return `volume space of this server is full: ${used} MB of ${cap.totalMb} MB in use, ${candidate.sizeMb} MB asked`;
  }
  return undefined;
}
