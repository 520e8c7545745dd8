// Policies on agents, functions and jobs, on the control plane (no sandbox starts here): a maxToken policy or a
// flavor policy leaving out Berth's one flavor is refused at write with a 422, a location policy that allows no
// served region turns the workload FAILED naming it, and changing or deleting the policy re-judges the workload.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../test-support/server.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('policies on workloads', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.close());

  const put = async (path: string, json: unknown) => s.api(path, { method: 'PUT', json });
  async function waitFor(path: string, ok: (o: any) => boolean): Promise<any> {
    let o: any;
    for (let i = 0; i < 200; i++) {
      o = await (await s.api(path)).json();
      if (ok(o)) return o;
      await sleep(25);
    }
    assert.fail(`${path} never reached the expected state: ${JSON.stringify(o?.events?.slice(-3))}`);
  }

  it('refuses a maxToken policy on an agent, a function and a job with a 422 naming the policy', async () => {
    const p = await put('/policies/tokens', {
      metadata: { name: 'tokens' },
      spec: { type: 'maxToken', maxTokens: { total: 1000 } },
    });
    assert.equal(p.status, 200);
    for (const path of ['/agents/tk', '/functions/tk', '/jobs/tk']) {
      const res = await put(path, { metadata: { name: 'tk' }, spec: { policies: ['tokens'] } });
      const body = await res.json();
      assert.equal(res.status, 422, `${path}: ${JSON.stringify(body)}`);
      assert.equal(body.errors[0].pointer, '/spec/policies/0');
      assert.match(body.errors[0].message, /"tokens" is a maxToken policy/);
    }
    // One whose resourceTypes leave agents out does not apply to them, so it is accepted.
    await put('/policies/model-tokens', {
      metadata: { name: 'model-tokens' },
      spec: { type: 'maxToken', maxTokens: { total: 1000 }, resourceTypes: ['model'] },
    });
    const ok = await put('/agents/tk', { metadata: { name: 'tk' }, spec: { policies: ['model-tokens'] } });
    assert.equal(ok.status, 200);
  });

  it('refuses a flavor policy that leaves out Berth’s cpu flavor, and accepts one that lists it', async () => {
    const gpu = await put('/policies/gpu', {
      metadata: { name: 'gpu' },
      spec: { type: 'flavor', flavors: [{ name: 't4', type: 'gpu' }] },
    });
    const body = await gpu.json();
    assert.equal(gpu.status, 422, JSON.stringify(body));
    assert.match(body.errors[0].message, /one flavor/);
    const cpu = await put('/policies/cpu', {
      metadata: { name: 'cpu' },
      spec: { type: 'flavor', flavors: [{ name: 'cpu', type: 'cpu' }] },
    });
    assert.equal(cpu.status, 200);
    await put('/agents/flv', { metadata: { name: 'flv' }, spec: { policies: ['cpu'] } });
    const o = await waitFor('/agents/flv', (x) => x.status === 'UPLOADING');
    assert.doesNotMatch(JSON.stringify(o.events), /POLICY_DENIED/);
  });

  it('a location policy allowing no served region fails the agent and the job; allowing one clears it', async () => {
    await put('/policies/eu', {
      metadata: { name: 'eu' },
      spec: { type: 'location', locations: [{ name: 'eu-west-1', type: 'region' }] },
    });
    for (const path of ['/agents/geo', '/jobs/geo']) {
      await put(path, { metadata: { name: 'geo' }, spec: { policies: ['eu'] } });
      const o = await waitFor(path, (x) => x.status === 'FAILED');
      assert.match(
        o.events.at(-1).message,
        /location policy "eu" allows eu-west-1; this server serves local/,
      );
    }
    const run = await s.api('/jobs/geo/executions', { method: 'POST', json: { tasks: [{}] } });
    assert.equal(run.status >= 400 && run.status < 500, true, `a denied job starts nothing (${run.status})`);

    // Changing the policy re-judges the workloads that refer to it, with no write to them.
    await put('/policies/eu', {
      metadata: { name: 'eu' },
      spec: { type: 'location', locations: [{ name: 'eu-west-1' }, { name: 'local' }] },
    });
    for (const path of ['/agents/geo', '/jobs/geo']) {
      const o = await waitFor(path, (x) => x.status === 'UPLOADING');
      assert.ok(o.events.some((e: any) => /policies allow it again/.test(e.message)));
    }
  });

  it('deleting a referenced policy fails the workload naming the missing policy', async () => {
    await put('/policies/gone', {
      metadata: { name: 'gone' },
      spec: { type: 'location', locations: [{ name: 'local' }] },
    });
    await put('/functions/orphan', { metadata: { name: 'orphan' }, spec: { policies: ['gone'] } });
    await waitFor('/functions/orphan', (x) => x.status === 'UPLOADING');
    const del = await s.api('/policies/gone', { method: 'DELETE' });
    assert.equal(del.status, 200);
    const o = await waitFor('/functions/orphan', (x) => x.status === 'FAILED');
    assert.match(o.events.at(-1).message, /policy "gone" does not exist/);
  });
});
