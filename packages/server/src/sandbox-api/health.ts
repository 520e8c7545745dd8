// GET /health: liveness plus what the host's standby logic needs — a sandbox with a running keepAlive process
// (activeKeepAlive > 0) must not be frozen.
import type { SandboxApi } from './context.js';
import { sendJson } from './http.js';
import type { Handler } from './router.js';
import type { HealthResponse } from './schema.js';

export function health(api: SandboxApi): Handler {
  return ({ res }) => sendJson(res, 200, healthOf(api));
}

export function healthOf(api: SandboxApi): HealthResponse {
  const seconds = (Date.now() - api.startedAt.getTime()) / 1000;
  return {
    status: 'ok',
    version: api.config.version,
    startedAt: api.startedAt.toISOString(),
    uptime: `${seconds.toFixed(1)}s`,
    uptimeSeconds: Math.floor(seconds),
    activeKeepAlive: api.processes.activeKeepAlive,
    runningProcesses: api.processes.runningCount,
    arch: process.arch,
    os: process.platform,
    upgradeCount: api.upgradeCount,
    lastUpgrade: api.lastUpgrade,
    ...(api.upgradedAt ? { upgradedAt: api.upgradedAt.toISOString() } : {}),
  };
}
