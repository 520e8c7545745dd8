// Where each volume of a cluster lives (docs/decisions/102-volumes-stay-on-their-node.md): the node whose disk holds
// its data, recorded by the volume controller when it made it (`node`). Kept from the store's change feed on every
// server, so a sandbox naming volumes is placed on their node without a read of the database.
import { followKinds } from '../store/follow-kinds.js';
import type { Store, StoredObject } from '../store/store.js';

const nameKey = (workspace: string, name: string) => `${workspace}/${name}`;

export class VolumeNodes {
  private readonly byName = new Map<string, string>();
  private unwatch?: () => void;

  constructor(private readonly store: Store) {}

  async start(): Promise<void> {
    this.unwatch = await followKinds(
      this.store,
      ['Volume'],
      (o) => nameKey(o.workspace, o.name),
      (k, o) => this.set(k, o),
    );
  }

  /**
   * The nodes holding the data of the workspace's volumes `names`, each once: none while they are not made yet (or
   * made before 102, unknown), more than one when they are on different nodes.
   */
  nodesOf(workspace: string, names: readonly string[]): string[] {
    const on = new Set<string>();
    for (const n of names) {
      const node = this.byName.get(nameKey(workspace, n));
      if (node) on.add(node);
    }
    return [...on];
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
