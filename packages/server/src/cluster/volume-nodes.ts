// Where each volume of a cluster lives (docs/decisions/102-volumes-stay-on-their-node.md): the node whose disk holds
// its data, recorded by the volume controller when it made it (`node`). Kept from the store's change feed on every
// server, so a sandbox naming volumes is placed on their node without a read of the database.
import { EVERY_WORKSPACE, type Store, type StoredObject } from '../store/store.js';

const nameKey = (workspace: string, name: string) => `${workspace}/${name}`;

export class VolumeNodes {
  private readonly byName = new Map<string, string>();
  private unwatch?: () => void;

  constructor(private readonly store: Store) {}

  async start(): Promise<void> {
    const seen = new Set<string>();
    this.unwatch = this.store.watch((c) => {
      if (c.object.kind !== 'Volume') return;
      const k = nameKey(c.object.workspace, c.object.name);
      seen.add(k);
      this.set(k, c.type === 'DELETED' ? undefined : c.object);
    });
    for (const o of await this.store.list({ workspace: EVERY_WORKSPACE, kind: 'Volume' })) {
      const k = nameKey(o.workspace, o.name);
      // A change that arrived during the listing is newer than what the listing read.
      if (!seen.has(k)) this.set(k, o);
    }
  }

  /** The node holding the volume's data; undefined while it is not made yet (or unknown: made before 102). */
  nodeOf(workspace: string, name: string): string | undefined {
    return this.byName.get(nameKey(workspace, name));
  }

  close(): void {
    this.unwatch?.();
  }

  private set(k: string, o: StoredObject | undefined) {
    const node = o?.body.node;
    if (typeof node === 'string' && node) this.byName.set(k, node);
    else this.byName.delete(k);
  }
}
