// Shared by the sandbox end-to-end tests: a real server on a data dir the test owns, so that after the
// server stops, every sandbox it left (sandboxes outlive the server by design) is removed and the dir deleted.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLinuxDriver } from '../../src/runtime/index.js';
import { removeDirLater, removeSandboxesIn, unmountVolumesIn } from '../../src/test-support/sandboxes.js';
import { startTestServer, type TestServer } from '../../src/test-support/server.js';

export interface SandboxServer extends TestServer {
  /** POST /v0/sandboxes; asserts a 200 and returns the body. */
  create(name: string, spec?: Record<string, unknown>): Promise<any>;
  /** fetch against a sandbox address (absolute URL) with the admin key in X-Blaxel-Authorization. */
  run(url: string, init?: RequestInit & { json?: unknown }): Promise<Response>;
  /** Polls GET /v0/sandboxes/{name} until `pred` holds for (body, status). */
  waitFor(name: string, pred: (body: any, status: number) => boolean, what?: string): Promise<any>;
}

/** Small sandboxes: tests start several, and memory is what a sandbox costs the host. */
export const TEST_MEMORY_MB = 256;

export const removeAllSandboxes = removeSandboxesIn;

/** A second driver on a server's data dir, to look at its sandboxes the way the runtime sees them. */
export const inspectingDriver = (dataDir: string) => createLinuxDriver({ dataDir, netPoolSize: 0 });

export async function startSandboxServer(
  env: Record<string, string> = {},
  dataDir?: string,
): Promise<SandboxServer> {
  const dir = dataDir ?? mkdtempSync(join(tmpdir(), 'berth-sbx-'));
  const s = await startTestServer({ BERTH_LOG_LEVEL: 'warn', ...env }, { dataDir: dir });
  const auth = { 'x-blaxel-authorization': `Bearer ${s.adminKey}` };
  return {
    ...s,
    async create(name, spec = {}) {
      const runtime = { memory: TEST_MEMORY_MB, ...((spec as any).runtime ?? {}) };
      const res = await s.api('/sandboxes', {
        method: 'POST',
        json: { metadata: { name }, spec: { ...spec, runtime } },
      });
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      return body;
    },
    run(url, init = {}) {
      const { json, ...rest } = init;
      const headers = new Headers(rest.headers);
      for (const [k, v] of Object.entries(auth)) if (!headers.has(k)) headers.set(k, v);
      if (json !== undefined) headers.set('content-type', 'application/json');
      return fetch(url, { ...rest, headers, body: json !== undefined ? JSON.stringify(json) : rest.body });
    },
    async waitFor(name, pred, what = 'the expected state') {
      let last: { status: number; body: any } = { status: 0, body: undefined };
      for (let i = 0; i < 600; i++) {
        const res = await s.api(`/sandboxes/${name}`);
        last = { status: res.status, body: await res.json() };
        if (pred(last.body, last.status)) return last.body;
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.fail(`sandbox ${name} never reached ${what}; last: ${JSON.stringify(last)}`);
    },
    async close() {
      await s.close();
      if (!dataDir) {
        await removeAllSandboxes(dir);
        await unmountVolumesIn(dir);
        removeDirLater(dir);
      }
    },
  };
}

/** The process answer of a synchronous exec. */
export async function exec(
  s: SandboxServer,
  url: string,
  command: string,
  extra: Record<string, unknown> = {},
) {
  const res = await s.run(`${url}/process`, {
    method: 'POST',
    json: { command, waitForCompletion: true, ...extra },
  });
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  return body;
}

/** GET through node:http, which (unlike fetch) lets a test set the Host header. */
export function getWithHost(
  url: string,
  host: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { ...headers, host } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => {
        body += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}
