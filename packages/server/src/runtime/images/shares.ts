// Images shared between workspaces (decision 051), one record per share under `<store>/shares/<id>.json`: which names
// of the source workspace, the image ids they stood for when shared, and the target workspace. A share is pending
// until an admin of the target accepts it (the names are then bound in the target's own table, charged to its quota)
// or declines it; the source may revoke it at any time (the target's names go, if they still stand for the shared
// image). Only the two workspaces of a share ever see it. A pending share keeps its images from collection.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { writeAtomic } from './names.js';

/** How long a share waits for the target's answer (the service's pending shares expire too). */
export const SHARE_TTL_MS = 7 * 24 * 3600 * 1000;

export interface ShareRecord {
  id: string;
  source: string;
  target: string;
  /** What the source asked to share, as given (`sandboxes/box`), for views. */
  imageName: string;
  /** Canonical names → image id (hex), as the source held them when it shared. */
  references: Record<string, string>;
  status: 'pending' | 'active';
  sharedBy: string;
  createdAt: string;
  expiresAt: string;
  acceptedAt?: string;
}

const ID = /^[a-f0-9]{32}$/;

export class ImageShares {
  private readonly dir: string;

  constructor(storeDir: string) {
    this.dir = join(storeDir, 'shares');
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
  }

  create(r: Omit<ShareRecord, 'id' | 'status' | 'createdAt' | 'expiresAt'>, now = new Date()): ShareRecord {
    const rec: ShareRecord = {
      ...r,
      id: randomBytes(16).toString('hex'),
      status: 'pending',
      createdAt: now.toISOString(),
      expiresAt: new Date(now.getTime() + SHARE_TTL_MS).toISOString(),
    };
    this.save(rec);
    return rec;
  }

  save(rec: ShareRecord): void {
    writeAtomic(join(this.dir, `${rec.id}.json`), JSON.stringify(rec));
  }

  get(id: string): ShareRecord | undefined {
    if (!ID.test(id)) return undefined;
    const f = join(this.dir, `${id}.json`);
    return existsSync(f) ? JSON.parse(readFileSync(f, 'utf8')) : undefined;
  }

  remove(id: string): void {
    if (ID.test(id)) rmSync(join(this.dir, `${id}.json`), { force: true });
  }

  /** Every share (expired pending ones are dropped as they are met). */
  all(now = Date.now()): ShareRecord[] {
    const out: ShareRecord[] = [];
    for (const n of readdirSync(this.dir)) {
      if (!n.endsWith('.json')) continue;
      let r: ShareRecord;
      try {
        r = JSON.parse(readFileSync(join(this.dir, n), 'utf8'));
      } catch {
        continue;
      }
      if (r.status === 'pending' && Date.parse(r.expiresAt) < now) this.remove(r.id);
      else out.push(r);
    }
    return out;
  }

  /** Shares from or to a workspace (and nothing of anyone else's). */
  of(workspace: string): ShareRecord[] {
    return this.all().filter((r) => r.source === workspace || r.target === workspace);
  }

  /** Image ids pending shares name: kept from collection until the share is answered. */
  pendingIds(): Set<string> {
    return new Set(
      this.all()
        .filter((r) => r.status === 'pending')
        .flatMap((r) => Object.values(r.references)),
    );
  }

  /** A deleted workspace's shares go, from it and to it (what a target accepted stays its own names). */
  dropWorkspace(workspace: string): void {
    for (const r of this.all()) if (r.source === workspace || r.target === workspace) this.remove(r.id);
  }
}
