// The sandbox API daemon: the HTTP service each sandbox runs inside itself (processes, filesystem, ports, terminal,
// MCP), wire-compatible with the service's open sandbox API. `daemon.ts` is its entry; `schema.ts` its wire shapes.
export { buildRouter, createApi, createHttpServer } from './app.js';
export { type DaemonConfig, loadDaemonConfig, SANDBOX_API_VERSION } from './config.js';
export type { SandboxApi } from './context.js';
export * from './schema.js';
