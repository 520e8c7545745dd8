// Which server holds the cluster's instances: today the one leading the controllers (leadership.ts), which starts
// them. The gateways of the other servers send data-plane requests there (gateway/peer.ts). Read from the node list
// in the background, so deciding costs a request nothing.
import type { HolderDecision } from '../http/peer-forward.js';
import type { Leadership } from './leadership.js';
import type { Nodes } from './nodes.js';

const HERE: HolderDecision = { here: true };

export interface InstanceHolder {
  decide(): HolderDecision;
  close(): void;
}

export async function instanceHolder(o: {
  nodes: Nodes;
  leadership: Leadership;
  role: string;
  refreshMs?: number;
  warn: (err: unknown, msg: string) => void;
}): Promise<InstanceHolder> {
  let leader: URL | undefined;
  const refresh = async () => {
    try {
      const holder = (await o.nodes.list()).find(
        (n) => n.healthy && n.leads.includes(o.role) && n.id !== o.nodes.self.id,
      );
      leader = holder ? new URL(holder.address) : undefined;
    } catch (err) {
      o.warn(err, 'could not read which server holds the instances');
    }
  };
  await refresh();
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    void refresh().finally(() => {
      running = false;
    });
  }, o.refreshMs ?? 500);
  timer.unref();
  return {
    decide() {
      if (o.leadership.leads().includes(o.role)) return HERE;
      if (leader) return { peer: leader };
      return {
        unavailable:
          'no server of the cluster holds instances now (another takes over within seconds of the last one stopping); try again',
      };
    },
    close: () => clearInterval(timer),
  };
}
