// The runtime: images, the lazily opened Linux driver (its egress events), the owned instances, snapshot layers.
import { join } from 'node:path';
import { K } from '../auth/records.js';
import type { Config } from '../config.js';
import { sayEgressProxy } from '../controllers/sandbox/sandbox-faults.js';
import { sayDeepStandby } from '../controllers/sandbox/deep-standby-event.js';
import { diskMbFor } from '../controllers/sandbox/sandbox-spec.js';
import { SANDBOX_MEMORY_MB } from '../kinds/sandbox.js';
import { Instances } from '../runtime/instances.js';
import { LazyRuntime } from '../runtime/lazy-runtime.js';
import { createLinuxDriver, imageRootsInUse, ImageStore } from '../runtime/index.js';
import { readRegistryAuth } from '../runtime/images/auth-file.js';
import { Snapshots } from '../controllers/sandbox/snapshots.js';
import { SnapshotLayers } from '../runtime/snapshot-layers.js';
import { EVERY_WORKSPACE } from '../store/store.js';
import type { Core } from './store.js';

export async function openRuntime(config: Config, parts: Core) {
  const { outbound, store, logger, resources, held, tokens } = parts;
  const images = new ImageStore({
    dataDir: config.dataDir,
    insecure: config.insecureRegistries,
    mirrors: config.registryMirrors,
    credentials: readRegistryAuth(config.registryAuthFile),
    maxLayerBytes: config.imageMaxLayerBytes,
    quotaBytes: config.imageQuotaMb && config.imageQuotaMb * 1024 ** 2,
    rootsInUse: (workspace) => imageRootsInUse(config.dataDir, workspace),
    outbound,
  });
  // A deleted workspace's image names go with it: at once, and at start for one deleted by a server that died
  // before it could drop them (a new workspace of the same name never holds the old one's images).
  store.watch((c) => {
    if (c.type === 'DELETED' && c.object.kind === K.workspace) images.forgetWorkspace(c.object.name);
  });
  images.keepWorkspaces(
    new Set((await store.list({ workspace: EVERY_WORKSPACE, kind: K.workspace })).map((w) => w.name)),
  );
  const driver = new LazyRuntime(config.dataDir, logger, (dataDir) =>
    createLinuxDriver({
      dataDir,
      images,
      warmPoolSize: config.warmPoolSize,
      warmPoolMax: config.warmPoolMax,
      // A sandbox created with the defaults finds its layer's cap already right (no remount on its create).
      warmDiskMb: diskMbFor(SANDBOX_MEMORY_MB),
      deepStandbyAfterS: config.deepStandbyAfterS,
      deepStandbyKeepDaemon: config.deepStandbyDaemon === 'resident',
      swap: { file: join(dataDir, 'swap', 'berth.swap'), sizeMb: config.swapMb },
      onDeepStandby: (e) => void sayDeepStandby({ resources: held, driver, logger }, e),
      allowCidrs: config.sandboxAllowCidrs,
      egressResolvers: config.egressResolvers,
      egressGateways: config.egressGateways,
      // One line per proxied connection and per DNS answer: sandbox address, name, decision (never headers).
      onEgressEvent: (e) => {
        if (e.type === 'audit') logger.info({ egress: e.line }, 'egress');
        else if (e.type === 'request') {
          logger.info({ egress: e.request }, 'egress request');
          // The provider refused a connection's access token the proxy put in: refreshed once (decision 049).
          if (e.request.status === 401 && e.request.token) tokens.unauthorized(e.request.token);
        } else if (e.type === 'proxy') {
          logger.warn({ proxy: e.state, sandboxes: e.sources.length }, `egress proxy ${e.state}`);
          void sayEgressProxy({ resources: held, driver }, e).catch((err) =>
            logger.warn({ err }, 'could not record the egress proxy event'),
          );
        } else logger.debug({ dns: e.decision }, 'egress dns');
      },
    }),
  );
  // Every runtime instance starts, goes and is collected here, owned by an object (decision 044).
  const instances = new Instances({ driver, logger });
  // Snapshot layers (decision 053): what captures a killed server left half-written goes before anything reads them.
  const snapshotLayers = new SnapshotLayers(config.dataDir, config.snapshotMaxLayers);
  snapshotLayers.sweep();
  const snapshots = new Snapshots({
    resources,
    instances,
    layers: snapshotLayers,
    quotaBytes: config.snapshotQuotaMb && config.snapshotQuotaMb * 1024 ** 2,
  });
  return { images, driver, instances, snapshotLayers, snapshots };
}

export type Runtime = Awaited<ReturnType<typeof openRuntime>>;
