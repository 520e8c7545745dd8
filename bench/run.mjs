// `npm run bench`: every benchmark, each printing its figure beside a same-run baseline and the ratio.
// `npm run bench -- api` runs only the named ones.
import { benchAgents } from './agents/bench.mjs';
import { benchAgentsBuild } from './agents/build.mjs';
import { benchAgentsCold } from './agents/cold.mjs';
import { benchAgentsColdBuild } from './agents/cold-build.mjs';
import { benchChaos, benchSoak } from './chaos/chaos.mjs';
import { benchClusterAgentFailover } from './cluster/agent-failover.mjs';
import { benchClusterAppCopies } from './cluster/app-copies.mjs';
import { benchClusterImagesAhead } from './cluster/images-ahead.mjs';
import { benchClusterLeaderFence } from './cluster/leader-fence.mjs';
import { benchClusterPlacement } from './cluster/placement.mjs';
import { benchClusterScale } from './cluster/scale.mjs';
import { benchClusterStoreWrites } from './cluster/store-writes.mjs';
import { benchApi } from './api/bench.mjs';
import { benchFuzz } from './api/fuzz.mjs';
import { benchCliStart } from './cli/start.mjs';
import { benchJobs } from './jobs/bench.mjs';
import { benchModels } from './models/bench.mjs';
import { benchCreate } from './sandboxes/create.mjs';
import { benchDensity } from './sandboxes/density.mjs';
import { benchDeepStandby } from './sandboxes/deep-standby.mjs';
import { benchEgress } from './sandboxes/egress.mjs';
import { benchExec } from './sandboxes/exec.mjs';
import { benchVolumes } from './sandboxes/volumes.mjs';
import { benchImages } from './sandboxes/images.mjs';
import { benchImageBuild } from './images/build.mjs';
import { benchWake } from './sandboxes/wake.mjs';
import { benchStandbyCycles } from './sandboxes/standby-cycles.mjs';
import { benchSnapshots } from './sandboxes/snapshots.mjs';

const all = {
  api: benchApi,
  'cli-start': benchCliStart,
  models: benchModels,
  'sandbox-wake': benchWake,
  'sandbox-create': benchCreate,
  'sandbox-exec': benchExec,
  'sandbox-density': benchDensity,
  'sandbox-deep-standby': benchDeepStandby,
  'sandbox-volumes': benchVolumes,
  agents: benchAgents,
  'agents-cold': benchAgentsCold,
  'agents-cold-build': benchAgentsColdBuild,
  'agents-build': benchAgentsBuild,
  'sandbox-images': benchImages,
  'image-build': benchImageBuild,
  'sandbox-egress': benchEgress,
  jobs: benchJobs,
  fuzz: benchFuzz,
  'standby-cycles': benchStandbyCycles,
  'sandbox-snapshots': benchSnapshots,
  'cluster-agent-failover': benchClusterAgentFailover,
  'cluster-images-ahead': benchClusterImagesAhead,
  'cluster-app-copies': benchClusterAppCopies,
  'cluster-placement': benchClusterPlacement,
  'cluster-scale': benchClusterScale,
  'cluster-leader-fence': benchClusterLeaderFence,
  'cluster-store-writes': benchClusterStoreWrites,
  chaos: benchChaos,
  soak: benchSoak,
};
const only = process.argv.slice(2);
for (const [name, fn] of Object.entries(all)) {
  if (only.length && !only.includes(name)) continue;
  await fn();
}
