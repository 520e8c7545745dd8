// In a cluster, each server copies every workspace image it lacks from the others, so that an image the leader
// acknowledged survives its death and a new leader serves it (runtime/images/images-ahead.ts, docs/decisions/
// 087-images-ahead.md); copies made, failed, and names let go of are counted in /metrics. On SQLite there is one
// store: nothing to copy. BERTH_IMAGES_AHEAD=false turns it off (a node then copies an image when it starts a sandbox
// on it, as in 081).
import { Counter, type Registry } from 'prom-client';
import { keys } from '../auth/records.js';
import type { Config } from '../config.js';
import { peerToken } from '../crypto/peer-token.js';
import { goneRecordOf } from '../runtime/images/gone-record.js';
import { type AheadOutcome, ImagesAhead } from '../runtime/images/images-ahead.js';
import type { PeerImages } from '../runtime/images/peer-images.js';
import type { Late } from './context.js';
import type { Runtime } from './runtime.js';
import type { Core } from './store.js';

/** The peer addresses of the other healthy nodes, as the node list says now. */
export const otherPeers = (late: Late, selfId: string) => async () =>
  ((await late.nodes?.list()) ?? [])
    .filter((n) => n.healthy && n.id !== selfId)
    .map((n) => new URL(n.address));

/**
 * Opens images ahead for a server of a cluster, and lets go of the names the record says were let go of while this
 * server was away, before it serves or starts anything; `start` begins its passes once it has joined.
 */
export async function openImagesAhead(
  config: Config,
  late: Late,
  registry: Registry,
  parts: Core & Runtime & { peerImages?: PeerImages },
): Promise<ImagesAhead | undefined> {
  const { peerImages, images, store, logger, selfId, masterKey, led } = parts;
  if (!config.databaseUrl || !config.imagesAhead || !peerImages) return undefined;
  const done = new Counter({
    name: 'berth_images_ahead_total',
    help: 'Workspace images this server copied from another ahead of need (copied), copies that failed here (failed), and names it let go of because the leader had (removed)',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  for (const o of ['copied', 'failed', 'removed'] as const) done.labels(o).inc(0);
  const ahead = new ImagesAhead({
    images,
    peerImages,
    token: peerToken(masterKey),
    // Before this server joined, it does not know who leads: nothing to compare with yet.
    holder: () => late.holder?.decide() ?? { unavailable: 'this server has not joined the cluster yet' },
    peers: otherPeers(late, selfId),
    workspaceExists: async (ws) => (await store.get(keys.workspace(ws))) !== undefined,
    logger,
    counted: (o: AheadOutcome) => done.labels(o).inc(),
    goneRecord: goneRecordOf(store, led.store),
  });
  await ahead.applyRecord();
  return ahead;
}
