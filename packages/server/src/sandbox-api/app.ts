// Composition of the sandbox API: every route in one visible table, the services they share, the HTTP server.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { DaemonConfig } from './config.js';
import type { SandboxApi } from './context.js';
import { contentSearch } from './fs/content-search.js';
import { deletePath } from './fs/delete.js';
import { findFiles } from './fs/find.js';
import {
  abortUpload,
  completeUpload,
  initiateUpload,
  listParts,
  listUploads,
  uploadPart,
} from './fs/multipart.js';
import { readPath } from './fs/read.js';
import { fuzzySearch } from './fs/search.js';
import { deleteTree, getTree, putTree } from './fs/tree.js';
import { UploadStore } from './fs/upload-store.js';
import { watchPath } from './fs/watch.js';
import { writePath } from './fs/write.js';
import { health } from './health.js';
import { mcp } from './mcp.js';
import { processPorts } from './network/ports.js';
import { PathResolver } from './paths.js';
import { proxyHttp, proxyUpgrade } from './port-proxy.js';
import { getProcess } from './process/get.js';
import { killProcess } from './process/kill.js';
import { listProcesses } from './process/list.js';
import { processLogs } from './process/logs.js';
import { streamLogs } from './process/logs-stream.js';
import { ProcessManager } from './process/manager.js';
import { startProcess } from './process/start.js';
import { closeStdin, writeStdin } from './process/stdin.js';
import { stopProcess } from './process/stop.js';
import { Router } from './router.js';
import { drivesUnavailable } from './drives.js';
import { terminal } from './terminal.js';
import { codeHash, upgrade } from './upgrade.js';

/** Idle keep-alive connections from the host gateway are kept this long (longer than the gateway's own pool idle). */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

export function createApi(config: DaemonConfig): SandboxApi {
  return {
    config,
    paths: new PathResolver({ workdir: config.workdir, home: config.home, root: config.root }),
    processes: new ProcessManager(),
    uploads: new UploadStore(),
    startedAt: new Date(),
    codeHash: safeCodeHash(),
    upgradeCount: 0,
    lastUpgrade: { status: 'idle', step: 'none', version: config.version },
  };
}

/**
 * The api of code taking over from an earlier daemon in this process (upgrade.ts): the earlier one's processes
 * adopted into a new manager, its uploads as they are, its start time kept (the process did not restart).
 */
export function adoptApi(config: DaemonConfig, prev: SandboxApi): SandboxApi {
  const processes = new ProcessManager();
  processes.adopt(prev.processes.list());
  const at = new Date();
  // A daemon from before the count existed had upgraded once when it recorded upgradedAt.
  const before = prev.upgradeCount ?? (prev.upgradedAt ? 1 : 0);
  return {
    ...createApi(config),
    processes,
    uploads: prev.uploads,
    startedAt: prev.startedAt,
    upgradedAt: at,
    upgradeCount: before + 1,
    lastUpgrade: {
      status: 'completed',
      step: 'completed',
      version: config.version,
      lastAttempt: at.toISOString(),
    },
  };
}

function safeCodeHash(): string {
  try {
    return codeHash();
  } catch {
    return 'unknown';
  }
}

export function buildRouter(api: SandboxApi, server: () => Server): Router {
  const r = new Router();
  r.on('GET', '/health', health(api)).on('GET', '/', health(api));

  r.on('GET', '/process', listProcesses(api))
    .on('POST', '/process', startProcess(api))
    .on('GET', '/process/:id/logs/stream', streamLogs(api))
    .on('GET', '/process/:id/logs', processLogs(api))
    .on('POST', '/process/:id/stdin', writeStdin(api))
    .on('DELETE', '/process/:id/stdin', closeStdin(api))
    .on('DELETE', '/process/:id/kill', killProcess(api))
    .on('GET', '/process/:id', getProcess(api))
    .on('DELETE', '/process/:id', stopProcess(api));

  r.on('GET', '/filesystem/tree/*path', getTree(api))
    .on('PUT', '/filesystem/tree/*path', putTree(api))
    .on('DELETE', '/filesystem/tree/*path', deleteTree(api))
    .on('GET', '/filesystem/*path', readPath(api))
    .on('PUT', '/filesystem/*path', writePath(api))
    .on('DELETE', '/filesystem/*path', deletePath(api))
    .on('GET', '/filesystem-find/*path', findFiles(api))
    .on('GET', '/filesystem-search/*path', fuzzySearch(api))
    .on('GET', '/filesystem-content-search/*path', contentSearch(api))
    .on('GET', '/watch/filesystem/*path', watchPath(api));

  r.on('GET', '/filesystem-multipart', listUploads(api))
    .on('POST', '/filesystem-multipart/initiate/*path', initiateUpload(api))
    .on('PUT', '/filesystem-multipart/:id/part', uploadPart(api))
    .on('POST', '/filesystem-multipart/:id/complete', completeUpload(api))
    .on('DELETE', '/filesystem-multipart/:id/abort', abortUpload(api))
    .on('GET', '/filesystem-multipart/:id/parts', listParts(api));

  r.on('GET', '/network/process/:pid/ports', processPorts(api));
  r.on('POST', '/upgrade', upgrade(api, server));
  r.on('*', '/drives/*rest', drivesUnavailable());
  r.on('*', '/port/:port/*rest', proxyHttp());
  r.on('POST', '/mcp', mcp(api)).on('GET', '/mcp', mcp(api)).on('DELETE', '/mcp', mcp(api));

  r.upgrade('/terminal/ws', terminal(api)).upgrade('/port/:port/*rest', proxyUpgrade());
  return r;
}

export function createHttpServer(api: SandboxApi): Server {
  const server = createServer({
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    headersTimeout: KEEP_ALIVE_TIMEOUT_MS + 1000,
    requestTimeout: 0,
  });
  serveOn(server, api);
  return server;
}

/** Makes `server` answer with this code's routes over `api`, in place of whatever answered before (an upgrade). */
export function serveOn(server: Server, api: SandboxApi): void {
  const router = buildRouter(api, () => server);
  server.removeAllListeners('request');
  server.removeAllListeners('upgrade');
  server.on('request', (req, res) => withCors(req, res, router.handle));
  server.on('upgrade', router.handleUpgrade);
}

/** Browsers call the sandbox API across origins; what goes to /port/ is the sandboxed app's business, not ours. */
function withCors(
  req: IncomingMessage,
  res: ServerResponse,
  next: (req: IncomingMessage, res: ServerResponse) => void,
) {
  if (req.url?.startsWith('/port/')) return next(req, res);
  res.setHeader('access-control-allow-origin', '*');
  res.setHeader('access-control-allow-methods', 'GET, POST, PUT, DELETE, OPTIONS');
  res.setHeader('access-control-allow-headers', '*');
  if (req.method === 'OPTIONS') {
    res.writeHead(204).end();
    return;
  }
  next(req, res);
}
