// What every handler of the daemon is given: its configuration and the few long-lived services.
import type { DaemonConfig } from './config.js';
import type { UploadStore } from './fs/upload-store.js';
import type { PathResolver } from './paths.js';
import type { ProcessManager } from './process/manager.js';
import type { UpgradeStatus } from './schema.js';

export interface SandboxApi {
  config: DaemonConfig;
  paths: PathResolver;
  processes: ProcessManager;
  uploads: UploadStore;
  startedAt: Date;
  /** Hash of the daemon code this api runs (upgrade.ts), and when that code took over from an earlier one. */
  codeHash: string;
  upgradedAt?: Date;
  /** Upgrades completed in this process (carried from one code to the next), and how the last one went. */
  upgradeCount: number;
  lastUpgrade: UpgradeStatus;
}
