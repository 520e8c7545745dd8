// The per-sandbox gauges of /metrics, read through a real store and the sanctioned fake runtime.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { FakeDriver } from '../runtime/fake.js';
import { sandboxId } from '../runtime/sandbox-id.js';
import { SqliteStore } from '../store/sqlite.js';
import { create, remove } from '../store/store.js';
import { registerMetrics } from './metrics.js';
import { sandboxSampler } from './sandbox-metrics.js';
import { smallSandboxSpec } from '../test-support/sandbox-spec.js';

const SPEC = smallSandboxSpec({ diskMb: 512, image: '' });
const key = (workspace: string, name: string) => ({ kind: 'Sandbox', workspace, parent: '', name });

describe('per-sandbox metrics', () => {
  let dir: string;
  let store: SqliteStore;
  let driver: FakeDriver;
  let app: FastifyInstance;
  const scrape = async () => (await app.inject({ method: 'GET', url: '/metrics' })).body;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-sbx-metrics-'));
    store = new SqliteStore(join(dir, 'berth.db'));
    driver = new FakeDriver();
    app = Fastify();
    // This scrape may read every workspace (as with the operator's token); who may is metrics.test.ts's subject.
    registerMetrics(app, new Registry(), {
      sandboxes: sandboxSampler({ store, driver }),
      access: async (headers) => (ws) =>
        headers['x-scrape-workspace'] === undefined || headers['x-scrape-workspace'] === ws,
    });
    await app.ready();
  });
  after(async () => {
    await app.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reports state, memory and CPU time per workspace and sandbox, read at scrape time', async () => {
    for (const [ws, name] of [
      ['default', 'alpha'],
      ['team-b', 'beta'],
    ]) {
      await create(store, key(ws, name), { metadata: { name }, spec: {} });
      await driver.ensure(sandboxId(ws, name), SPEC);
    }
    driver.burnCpu(sandboxId('default', 'alpha'), 1.5);
    await driver.freeze(sandboxId('team-b', 'beta'));

    const text = await scrape();
    assert.match(text, /berth_sandbox_state\{workspace="default",sandbox="alpha",state="running"\} 1/);
    assert.match(text, /berth_sandbox_state\{workspace="default",sandbox="alpha",state="standby"\} 0/);
    assert.match(text, /berth_sandbox_state\{workspace="team-b",sandbox="beta",state="standby"\} 1/);
    assert.match(text, /berth_sandbox_memory_bytes\{workspace="default",sandbox="alpha"\} 8388608/);
    assert.match(text, /# TYPE berth_sandbox_cpu_seconds_total counter/);
    assert.match(text, /berth_sandbox_cpu_seconds_total\{workspace="default",sandbox="alpha"\} 1.5/);

    // Read again at the next scrape, not accumulated: the counter is the kernel's figure.
    await driver.thaw(sandboxId('team-b', 'beta'));
    driver.burnCpu(sandboxId('default', 'alpha'), 0.5);
    const next = await scrape();
    assert.match(next, /berth_sandbox_cpu_seconds_total\{workspace="default",sandbox="alpha"\} 2\n/);
    assert.match(next, /berth_sandbox_state\{workspace="team-b",sandbox="beta",state="running"\} 1/);
  });

  it("a scrape allowed one workspace reads that workspace's sandboxes only; one allowed none, no sandbox", async () => {
    const only = async (headers: Record<string, string>) =>
      (await app.inject({ method: 'GET', url: '/metrics', headers })).body;
    const teamB = await only({ 'x-scrape-workspace': 'team-b' });
    assert.match(teamB, /berth_sandbox_state\{workspace="team-b",sandbox="beta",state="running"\} 1/);
    assert.doesNotMatch(teamB, /alpha|workspace="default"/);
    const nobody = await only({ 'x-scrape-workspace': 'elsewhere' });
    assert.doesNotMatch(nobody, /sandbox="/);
    assert.match(nobody, /# TYPE berth_sandbox_memory_bytes gauge/);
    assert.match(nobody, /process_resident_memory_bytes/);
  });

  it('a sandbox that is gone, or whose processes died, leaves the output', async () => {
    await driver.remove(sandboxId('team-b', 'beta'));
    await remove(store, key('team-b', 'beta'));
    driver.kill(sandboxId('default', 'alpha'));
    const text = await scrape();
    assert.doesNotMatch(text, /sandbox="beta"/);
    assert.doesNotMatch(text, /sandbox="alpha"/);
    assert.match(text, /# TYPE berth_sandbox_state gauge/);
  });

  it('the scrape still answers when the runtime cannot list its sandboxes', async () => {
    const broken = Fastify();
    const failing = Object.assign(new FakeDriver(), {
      list: async () => {
        throw new Error('sandboxes are unavailable on this host');
      },
    });
    registerMetrics(broken, new Registry(), {
      sandboxes: sandboxSampler({ store, driver: failing }),
      access: async () => () => true,
    });
    const r = await broken.inject({ method: 'GET', url: '/metrics' });
    assert.equal(r.statusCode, 200);
    assert.match(r.body, /process_resident_memory_bytes/);
    await broken.close();
  });
});
