// A workspace's quotas (decision 040), each with its limit, what it uses now, and the server setting that sets it:
// GET /v0/quotas for the workspace the request acts in, GET /v0/workspaces/{name}/quotas by name. Any member reads
// its own workspace's; any other workspace answers 404, as every workspace route does. Sandboxes are counted from
// the store, what runs from the ledger, volume space as the volume capacity counts it (volume-capacity.ts).
import type { FastifyInstance } from 'fastify';
import type { AuthenticatorImpl } from '../auth/authenticator.js';
import { requireRole } from '../auth/require-role.js';
import { QUOTA_SETTINGS, type QuotaLimits } from '../config.js';
import type { QuotaLedger } from '../controllers/core/quota-ledger.js';
import { memoryInUse, type Usage, withSandboxUse } from '../controllers/core/quotas.js';
import { type VolumeCapacity, workspaceSpaceMb } from '../controllers/volume/volume-capacity.js';
import type { Store } from '../store/store.js';
import { principalOf } from './members.js';

/** The image store's bytes of the workspace and its limit (BERTH_QUOTA_IMAGE_MB), in MB; limit absent: none. */
export type ImageUsage = (workspace: string) => { usedMb: number; limitMb?: number };

export interface QuotaRouteDeps {
  store: Store;
  ledger: QuotaLedger;
  authenticator: Pick<AuthenticatorImpl, 'accessIn'>;
  volumes?: VolumeCapacity;
  /** The unpacked bytes of the images the workspace holds (the image store counts them, decision 037). */
  images: ImageUsage;
}

interface Line {
  /** null: no bound. */
  limit: number | null;
  used: number;
  unit?: 'MB';
  /** The server setting that sets the limit (the server's operator changes it). */
  setting: string;
}

export interface QuotasView {
  workspace: string;
  quotas: {
    memory: Line & { usedBy: Usage['memoryMb'] };
    sandboxes: Line;
    replicas: Line;
    builds: Line;
    jobTasks: Line;
    volumes: Line;
    images: Line;
  };
}

export function quotaView(
  workspace: string,
  limits: QuotaLimits,
  use: Usage,
  volumes: { usedMb: number; limitMb?: number },
  images: { usedMb: number; limitMb?: number },
): QuotasView {
  const line = (k: Exclude<keyof QuotaLimits, 'memoryMb'>): Line => ({
    limit: limits[k],
    used: use[k],
    setting: QUOTA_SETTINGS[k],
  });
  return {
    workspace,
    quotas: {
      memory: {
        limit: limits.memoryMb,
        used: memoryInUse(use),
        unit: 'MB',
        setting: QUOTA_SETTINGS.memoryMb,
        usedBy: use.memoryMb,
      },
      sandboxes: line('sandboxes'),
      replicas: line('replicas'),
      builds: line('builds'),
      jobTasks: line('jobTasks'),
      volumes: {
        limit: volumes.limitMb ?? null,
        used: volumes.usedMb,
        unit: 'MB',
        setting: 'BERTH_WORKSPACE_VOLUME_CAPACITY_MB',
      },
      images: {
        limit: images.limitMb ?? null,
        used: images.usedMb,
        unit: 'MB',
        setting: 'BERTH_QUOTA_IMAGE_MB',
      },
    },
  };
}

export function registerQuotas(v0: FastifyInstance, deps: QuotaRouteDeps) {
  const viewOf = async (workspace: string) => {
    const use = withSandboxUse(
      deps.ledger.running(workspace),
      await deps.store.list({ kind: 'Sandbox', workspace }),
    );
    const held = [
      ...(await deps.store.list({ kind: 'Volume', workspace })),
      ...(await deps.store.list({ kind: 'Drive', workspace })),
    ];
    const volumes = { usedMb: workspaceSpaceMb(held, workspace), limitMb: deps.volumes?.workspaceMb };
    return quotaView(workspace, deps.ledger.limits(workspace), use, volumes, deps.images(workspace));
  };

  v0.get('/quotas', async (req) => viewOf(requireRole(req, 'viewer').workspace));

  v0.get('/workspaces/:name/quotas', async (req) => {
    const { name } = req.params as { name: string };
    // Not a member: 404, exactly as for a workspace that does not exist.
    await deps.authenticator.accessIn(principalOf(req), name);
    return viewOf(name);
  });
}
