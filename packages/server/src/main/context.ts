// What the steps of the start (main.ts, main/) share besides their parts: the caller's options, and what is known
// only later in the start, read through \`Late\` by what is wired before.
import type { InstanceHolder } from '../cluster/instance-holder.js';
import type { Leadership } from '../cluster/leadership.js';
import type { Nodes } from '../cluster/nodes.js';
import type { QuotaLeases } from '../cluster/quota-leases.js';
import type { ImagesAhead } from '../runtime/images/images-ahead.js';
import type { Lookup } from '../outbound/index.js';
import type { ResourceKey } from '../store/store.js';

export interface StartOptions {
  logStream?: NodeJS.WritableStream;
  /** How the server's outbound requests resolve names (tests play a rebinding name); default: the host's. */
  outboundLookup?: Lookup;
  /**
   * This server led a role and lost its database session: it has stopped acting and must not act again (another
   * server may lead already). Default: log and exit, for the supervisor to start it again as a follower.
   */
  onFenced?: (role: string, err: unknown) => void;
}

export interface Late {
  /** The port listened on: config.port until listen, then the one bound (config.port 0 picks one). */
  actualPort: number;
  /** In a cluster, the holder of the controllers' instances and the sandboxes' placements, once joined. */
  holder?: InstanceHolder;
  nodes?: Nodes;
  /** In a cluster, what every node holds against the workspaces' quotas (decision 092), once joined. */
  quotaLeases?: QuotaLeases;
  /** Who leads the controllers (cluster/leadership.ts), once they started: what the leader's writes are fenced on. */
  leadership?: Leadership;
  /** In a cluster, the copies of workspace images between nodes (decision 087), once joined. */
  imagesAhead?: ImagesAhead;
  /** The controllers start after the gateway; until then nothing is reported (no request arrives before listen). */
  wakeController: (key: ResourceKey) => void;
}
