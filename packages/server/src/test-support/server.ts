// Starts a real Berth server on 127.0.0.1 with a fresh data directory, for end-to-end tests.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { loadConfig } from '../config.js';
import { type RunningServer, startServer } from '../main.js';
import type { Lookup } from '../outbound/index.js';
import { removeDirLater, removeSandboxesIn, unmountVolumesIn } from './sandboxes.js';

export interface TestServer extends RunningServer {
  dataDir: string;
  adminKey: string;
  /** Everything the server logged, for assertions about what is (not) logged. */
  logs(): string;
  /** fetch against /v0 with the admin key unless `key` is given (null = no credential). */
  api(path: string, init?: RequestInit & { key?: string | null; json?: unknown }): Promise<Response>;
}

/**
 * The setting of a test server whose test fakes (model providers, callback receivers, registries, git servers)
 * listen on loopback: Berth's requests for users reach loopback only when it is listed (outbound/).
 */
export const OUTBOUND_LOOPBACK = { BERTH_OUTBOUND_ALLOW_CIDRS: '127.0.0.0/8' } as const;

export interface TestServerOptions {
  /**
   * Reuse this data directory (e.g. to restart a server on the same data). The caller owns it: close()
   * leaves it in place, and the admin key is read from its admin.key when the server is not new.
   */
  dataDir?: string;
  /** How the server resolves the names its outbound requests go to (a test playing a rebinding name). */
  outboundLookup?: Lookup;
  /** The admin key of a shared database another server bootstrapped (a second server of a cluster). */
  adminKey?: string;
}

export async function startTestServer(
  env: Record<string, string> = {},
  opts: TestServerOptions = {},
): Promise<TestServer> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'berth-test-'));
  const chunks: Buffer[] = [];
  const logStream = new PassThrough();
  logStream.on('data', (c: Buffer) => chunks.push(c));
  const config = loadConfig(
    { port: '0', dataDir },
    // One warm sandbox, grown to two at most by a burst: a test's pool refills are CPU taken from the files beside it.
    { BERTH_LOG_LEVEL: 'info', BERTH_WARM_POOL: '1', BERTH_WARM_POOL_MAX: '2', ...env },
  );
  const s = await startServer(config, { logStream, outboundLookup: opts.outboundLookup });
  const adminKey =
    s.adminKey ??
    opts.adminKey ??
    (opts.dataDir ? readFileSync(join(dataDir, 'admin.key'), 'utf8').trim() : undefined);
  if (!adminKey) throw new Error('a fresh data directory must yield an admin key');
  return {
    ...s,
    dataDir,
    adminKey,
    logs: () => Buffer.concat(chunks).toString('utf8'),
    async api(path, init = {}) {
      const { key, json, ...rest } = init;
      const headers = new Headers(rest.headers);
      const k = key === undefined ? adminKey : key;
      if (k) headers.set('authorization', `Bearer ${k}`);
      if (json !== undefined) headers.set('content-type', 'application/json');
      return fetch(`${s.url}/v0${path}`, {
        ...rest,
        headers,
        body: json !== undefined ? JSON.stringify(json) : rest.body,
      });
    },
    async close() {
      await s.close();
      if (opts.dataDir) return;
      await removeSandboxesIn(dataDir);
      await unmountVolumesIn(dataDir);
      removeDirLater(dataDir);
    },
  };
}
