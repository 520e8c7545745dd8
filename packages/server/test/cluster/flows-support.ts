// The three-server cluster both flows files run (decision 063): three `berth serve` on one PostgreSQL, the templates
// each file needs deployed with `berth deploy` through different servers, a second tenant, and the SDK, job and
// agent helpers their tests share.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { runBlaxelScript } from '../../src/test-support/blaxel.js';
import { seedNodeCache } from '../../src/test-support/dependency-cache.js';
import { newTenant, type Tenant } from '../../src/test-support/tenants.js';
import { berth } from '../berth-cli.js';
import { type Proc, sleep, useCluster } from './cluster-support.js';

const REPO = join(import.meta.dirname, '../../../..');
const TEMPLATES = join(REPO, 'templates');
const SDK_SCRIPT = join(import.meta.dirname, '../agents/blaxel-workloads.mjs');
export const AGENT = 'agent-python';
export const MCP = 'mcp-typescript';
export const JOB = 'job-typescript';

/**
 * Starts the cluster (nodes a, b, c; a leads) and, before the file's tests, deploys `templates`, the first through
 * node-b, the next through node-c, the next through node-a (followers send the upload on to the leader). `env` goes to
 * every server.
 */
export function useFlowsCluster(prefix: string, templates: string[], env: Record<string, string> = {}) {
  const cluster = useCluster(['node-a', 'node-b', 'node-c'], { prefix, env });
  const { api, procs } = cluster;
  let work: string;
  let tenant: Tenant;

  /** The agent's answer to the SDK's blAgent(name).run() through `p`. */
  const sdkAgent = async (p: Proc, key = cluster.key) => {
    const stdout = await runBlaxelScript(SDK_SCRIPT, { url: p.url, adminKey: key }, { AGENT_NAME: AGENT });
    const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
    assert.ok(line, stdout);
    const res = JSON.parse(line.slice('RESULT '.length)).agent;
    return typeof res === 'string' ? JSON.parse(res) : res;
  };
  const execution = async (p: Proc, tasks: unknown[]) => {
    const r = await api(p, `/jobs/${JOB}/executions`, { method: 'POST', json: { tasks } });
    const body = await r.json();
    assert.equal(r.status, 200, JSON.stringify(body));
    return body.executionId as string;
  };
  const ended = async (p: Proc, id: string, polls = 600) => {
    let e: any;
    for (let i = 0; i < polls; i++) {
      const r = await api(p, `/jobs/${JOB}/executions/${id}`);
      if (r.status === 200) {
        e = await r.json();
        if (['succeeded', 'failed', 'cancelled'].includes(e.status)) return e;
      }
      await sleep(200);
    }
    assert.fail(`execution ${id} never ended: ${JSON.stringify(e)}`);
  };
  const deploy = async (p: Proc, template: string) => {
    const dir = join(work, template);
    cpSync(join(TEMPLATES, template), dir, { recursive: true });
    // Builds run on the leader; any server may lead after a failover, so each has the dependency cache a build
    // with network would have filled.
    if (template !== AGENT) for (const q of procs) seedNodeCache(q.dir, 'default', dir, REPO);
    const r = await berth({ url: p.url, adminKey: cluster.key }, ['deploy', dir]);
    assert.equal(r.code, 0, r.out);
  };

  before(async () => {
    work = mkdtempSync(join(tmpdir(), `berth-${prefix}-`));
    tenant = await newTenant(cluster.server(cluster.node('node-a')), `tenant-${prefix}`);
    const through = ['node-b', 'node-c', 'node-a'];
    await Promise.all(templates.map((t, i) => deploy(cluster.node(through[i % 3]), t)));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  return {
    cluster,
    /** The second tenant, with its own key (made before the tests). */
    tenant: () => tenant,
    alive: () => procs.filter((p) => cluster.alive(p)),
    sdkAgent,
    execution,
    ended,
  };
}
