// The start the cluster tests share: N `berth serve` processes, each with its own data dir, on one PostgreSQL the test
// file starts itself, with one master key; the first server makes the admin key (and leads), the others start beside
// it. Stopped, their sandboxes removed and their dirs deleted when the suite ends.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { removeDirLater, removeSandboxesIn } from '../../src/test-support/sandboxes.js';
import type { TestServer } from '../../src/test-support/server.js';
import { testPostgres } from '../../src/test-support/store-drivers.js';
import type { TestPostgres } from '../../src/test-support/postgres.js';
import { serve, stopped } from '../serve-process.js';

export interface Proc {
  id: string;
  child: ChildProcess;
  url: string;
  dir: string;
  /** The tail of what it wrote on stderr. */
  stderr: () => string;
}

export type ApiInit = RequestInit & { json?: unknown; key?: string };

export interface Cluster {
  /** The servers, in the order of `ids`; one started again replaces its entry. */
  readonly procs: Proc[];
  /** The admin key the first server made. */
  readonly key: string;
  /** The settings every server shares (BERTH_DATABASE_URL among them, once started). */
  readonly env: Record<string, string>;
  /** The test's PostgreSQL (to restart it). */
  readonly pg: TestPostgres;
  node(id: string): Proc;
  /** Starts server `id` (again, on its old data dir if it ran before); resolves once it listens. */
  start(id: string): Promise<Proc>;
  /** kill -9 of server `id`; resolves once it has exited. */
  kill(id: string): Promise<void>;
  alive(p: Proc): boolean;
  /** A `/v0` request through `p`, as the admin unless `init.key` says otherwise. */
  api(p: Proc, path: string, init?: ApiInit): Promise<Response>;
  /** A POST to `/run/default/<path>` through `p`. */
  run(p: Proc, path: string, json: unknown, key?: string): Promise<Response>;
  /** A command run to completion in a sandbox through `p`. */
  exec(p: Proc, sandbox: string, command: string, key?: string): Promise<Response>;
  /** The node list as `p` answers it. */
  nodes(p: Proc): Promise<any[]>;
  /** `p` as the test servers' shape, for `newTenant`. */
  server(p: Proc): TestServer;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Registers the suite's `before` (start every server in `ids`) and `after` (stop and clean); call it in a `describe`
 * before the suite's own hooks. `env`: settings added to every server's (BERTH_PUBLIC_URL, say).
 */
export function useCluster(
  ids: string[],
  opts: {
    env?: Record<string, string>;
    /** Settings of one server's own, beside `env`. */
    envOf?: (id: string) => Record<string, string>;
    prefix?: string;
  } = {},
): Cluster {
  const env: Record<string, string> = {
    BERTH_MASTER_KEY: randomBytes(32).toString('base64'),
    BERTH_NODE_LEASE_S: '2',
    ...opts.env,
  };
  const procs: Proc[] = [];
  const dirs = new Map<string, string>();
  let key = '';
  let pg: TestPostgres | undefined;
  const alive = (p: Proc) => p.child.exitCode === null && p.child.signalCode === null;
  const node = (id: string) => {
    const p = procs.find((x) => x.id === id);
    assert.ok(p, `no server ${id}`);
    return p;
  };
  const start = async (id: string) => {
    let dir = dirs.get(id);
    if (!dir) {
      dir = mkdtempSync(join(tmpdir(), `berth-${opts.prefix ?? 'cluster'}-${id}-`));
      dirs.set(id, dir);
    }
    const p: Proc = {
      id,
      dir,
      ...(await serve(dir, { ...env, ...opts.envOf?.(id), BERTH_NODE_ID: id })),
    };
    // A server that ends on its own with a failure says why in the test's output (a crash under load is otherwise
    // seen only as the next request's ECONNREFUSED).
    p.child.once('exit', (code) => {
      if (code !== null && code !== 0 && code !== 75)
        process.stdout.write(`# server ${id} exited ${code}:\n${p.stderr().replace(/^/gm, '# ')}\n`);
    });
    const i = procs.findIndex((x) => x.id === id);
    if (i >= 0) procs[i] = p;
    else procs.push(p);
    return p;
  };
  const api = (p: Proc, path: string, init: ApiInit = {}) =>
    fetch(`${p.url}/v0${path}`, {
      ...init,
      headers: {
        'content-type': 'application/json',
        ...(init.headers as Record<string, string>),
        authorization: `Bearer ${init.key ?? key}`,
      },
      body: init.json === undefined ? init.body : JSON.stringify(init.json),
    });
  const run = (p: Proc, path: string, json: unknown, k = key) =>
    fetch(`${p.url}/run/default/${path}`, {
      method: 'POST',
      headers: { 'x-blaxel-authorization': `Bearer ${k}`, 'content-type': 'application/json' },
      body: JSON.stringify(json),
    });
  const cluster: Cluster = {
    procs,
    get key() {
      return key;
    },
    env,
    get pg() {
      assert.ok(pg, 'the cluster has not started');
      return pg;
    },
    node,
    start,
    async kill(id) {
      const p = node(id);
      p.child.kill('SIGKILL');
      await stopped(p.child);
    },
    alive,
    api,
    run,
    exec: (p, sandbox, command, k = key) =>
      run(p, `sandboxes/${sandbox}/process`, { command, waitForCompletion: true }, k),
    async nodes(p) {
      const r = await api(p, '/nodes');
      assert.equal(r.status, 200);
      return (await r.json()) as any[];
    },
    server: (p) =>
      ({
        url: p.url,
        adminKey: key,
        api: (path: string, init: ApiInit = {}) => api(p, path, init),
      }) as unknown as TestServer,
  };

  before(async () => {
    pg = await testPostgres();
    env.BERTH_DATABASE_URL = await pg.database();
    const first = await start(ids[0]);
    key = readFileSync(join(first.dir, 'admin.key'), 'utf8').trim();
    await Promise.all(ids.slice(1).map(start));
    procs.sort((x, y) => ids.indexOf(x.id) - ids.indexOf(y.id));
  });
  after(async () => {
    for (const p of procs) {
      if (alive(p)) {
        p.child.kill('SIGTERM');
        await stopped(p.child);
      }
    }
    for (const dir of dirs.values()) {
      await removeSandboxesIn(dir);
      removeDirLater(dir);
    }
  });
  return cluster;
}
