// What an earlier server left on this machine: its instances (kept or removed), orphan archives, legacy builds,
// deleted workspaces' builds and unused images; before anything starts.
import { K } from '../auth/records.js';
import type { Config } from '../config.js';
import { sandboxOwner } from '../controllers/sandbox/sandbox.js';
import { removeOrphanArchives } from '../controllers/volume/volume.js';
import { upgradeLegacyBuilds } from '../builds/legacy.js';
import { jobOwner } from '../controllers/job/job-owner.js';
import { removeOrphanLogs } from '../controllers/job/job-retention.js';
import { workloadOwner } from '../controllers/workload/workload-owner.js';
import { EVERY_WORKSPACE } from '../store/store.js';
import type { Runtime } from './runtime.js';
import type { Core } from './store.js';
import { jobLogsDir, type Workloads } from './workloads.js';

export async function collectLeftovers(config: Config, parts: Core & Runtime & Workloads) {
  const { store, logger, resources, clusterSelf } = parts;
  const { images, instances } = parts;
  const { code, builder, replicas } = parts;
  // The instances an earlier server left: each owner kind says which it still wants (sandboxes of objects that
  // exist; replicas of revisions workloads still run, kept for their deploy to take over, decision 029; tasks whose
  // attempts the job runner re-adopts); every other one, builds among them, is removed before anything starts.
  instances.register(sandboxOwner(store, clusterSelf));
  instances.register(workloadOwner({ store, builder, replicas }));
  instances.register(jobOwner(store));
  await instances.collect();
  await removeOrphanArchives({ resources, logger, now: () => new Date(), dataDir: config.dataDir });
  // Builds of a server before decision 036 are not used again (their deploys build anew); a deleted workspace's
  // builds a stopped server could not remove go now.
  const earlierTasksRunning = (await instances.list()).some((i) => i.role === 'task' && i.state !== 'dead');
  await upgradeLegacyBuilds({ dataDir: config.dataDir, store, code, earlierTasksRunning });
  const workspaces = await store.list({ workspace: EVERY_WORKSPACE, kind: K.workspace });
  await builder.removeWorkspacesExcept(new Set(workspaces.map((w) => w.name)));
  // Images only removed sandboxes ran on, and no workspace holds by name (docs/decisions/018-images.md).
  images.collect();
  // Task logs of executions the retention removed while another server led (decision 098).
  await removeOrphanLogs(store, jobLogsDir(config));
}
