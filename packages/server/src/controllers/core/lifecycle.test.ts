// Status transitions end to end: a real server, HTTP only, except where a test must leave an object
// half-way through a deletion while no server runs (then it writes the stopped server's store itself).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { withEvent } from '../../store/status-writes.js';
import { SqliteStore } from '../../store/sqlite.js';
import { startTestServer, type TestServer } from '../../test-support/server.js';

/** Polls GET until `pred` holds for the body (or for the status code, when the body is gone). */
async function waitFor(s: TestServer, path: string, pred: (body: any, status: number) => boolean) {
  let last: { status: number; body: any } = { status: 0, body: undefined };
  for (let i = 0; i < 1000; i++) {
    const res = await s.api(path);
    last = { status: res.status, body: await res.json() };
    if (pred(last.body, last.status)) return last.body;
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.fail(`${path} never reached the expected state; last: ${JSON.stringify(last)}`);
}

const statusIs = (status: string) => (b: any) => b?.status === status;
const steps = (b: any) => b.events.map((e: any) => e.status);

async function create(s: TestServer, path: string, json: unknown) {
  const res = await s.api(path, { method: 'POST', json });
  assert.equal(res.status, 200, JSON.stringify(await res.clone().json()));
  return res.json();
}

const JOB = (name: string, enabled = true) => ({ metadata: { name }, spec: { enabled } });

test('a VPC goes DEPLOYING then DEPLOYED, with a deployment event for each step', async () => {
  const s = await startTestServer();
  try {
    await create(s, '/vpcs', { metadata: { name: 'net' }, spec: {} });
    const vpc = await waitFor(s, '/vpcs/net', statusIs('DEPLOYED'));
    assert.deepEqual(steps(vpc), ['DEPLOYING', 'DEPLOYED']);
    for (const e of vpc.events) {
      assert.equal(e.type, 'deployment');
      assert.equal(e.revision, '1');
      assert.ok(!Number.isNaN(Date.parse(e.time)));
    }
  } finally {
    await s.close();
  }
});

test('egress IPs created at once never share an address: one holds the single pooled address, the rest are FAILED', async () => {
  const s = await startTestServer({ BERTH_EGRESS_GATEWAYS: 'gw=127.0.0.1' });
  try {
    await create(s, '/vpcs', { metadata: { name: 'net' }, spec: {} });
    await create(s, '/vpcs/net/egressgateways', { metadata: { name: 'gw' }, spec: { region: 'local' } });
    const names = ['a', 'b', 'c', 'd', 'e'];
    await Promise.all(
      names.map((name) => create(s, '/vpcs/net/egressgateways/gw/ips', { metadata: { name }, spec: {} })),
    );
    const ends = await Promise.all(
      names.map((n) =>
        waitFor(s, `/vpcs/net/egressgateways/gw/ips/${n}`, (b) => ['DEPLOYED', 'FAILED'].includes(b?.status)),
      ),
    );
    assert.equal(
      ends.filter((b) => b.status === 'DEPLOYED').length,
      1,
      JSON.stringify(ends.map((b) => b.spec)),
    );
    assert.equal(ends.filter((b) => b.spec.publicIp === '127.0.0.1').length, 1);
  } finally {
    await s.close();
  }
});

test("egress IPs are allocated from their gateway's pool; an empty or missing pool is FAILED with the reason", async () => {
  const s = await startTestServer({ BERTH_EGRESS_GATEWAYS: 'gw=127.0.0.1' });
  try {
    await create(s, '/vpcs', { metadata: { name: 'net' }, spec: {} });
    await create(s, '/vpcs/net/egressgateways', { metadata: { name: 'gw' }, spec: { region: 'local' } });
    await create(s, '/vpcs/net/egressgateways/gw/ips', { metadata: { name: 'ip1' }, spec: {} });
    const gw = await waitFor(s, '/vpcs/net/egressgateways/gw', statusIs('DEPLOYED'));
    assert.deepEqual(steps(gw), ['DEPLOYING', 'DEPLOYED']);
    assert.equal(gw.events.at(-1).message, 'egress from 1 host address (127.0.0.1)');
    const ip = await waitFor(s, '/vpcs/net/egressgateways/gw/ips/ip1', statusIs('DEPLOYED'));
    assert.equal(ip.spec.publicIp, '127.0.0.1');
    assert.equal(ip.spec.ipFamily, 'IPv4');
    assert.equal(ip.events.at(-1).message, 'allocated 127.0.0.1 from egress gateway gw');

    await create(s, '/vpcs/net/egressgateways/gw/ips', { metadata: { name: 'ip2' }, spec: {} });
    const full = await waitFor(s, '/vpcs/net/egressgateways/gw/ips/ip2', statusIs('FAILED'));
    assert.match(full.events.at(-1).message, /egress gateway gw has no free address: all 1 of its pool/);
    assert.equal(full.spec.publicIp, undefined);
    // Deleting the first frees its address for the second.
    assert.equal((await s.api('/vpcs/net/egressgateways/gw/ips/ip1', { method: 'DELETE' })).status, 200);
    const moved = await waitFor(s, '/vpcs/net/egressgateways/gw/ips/ip2', statusIs('DEPLOYED'));
    assert.equal(moved.spec.publicIp, '127.0.0.1');

    await create(s, '/vpcs/net/egressgateways', { metadata: { name: 'nopool' }, spec: {} });
    const bare = await waitFor(s, '/vpcs/net/egressgateways/nopool', statusIs('DEPLOYED'));
    assert.match(bare.events.at(-1).message, /no address pool on this server/);
    await create(s, '/vpcs/net/egressgateways/nopool/ips', { metadata: { name: 'ip' }, spec: {} });
    const none = await waitFor(s, '/vpcs/net/egressgateways/nopool/ips/ip', statusIs('FAILED'));
    assert.match(none.events.at(-1).message, /egress gateway nopool has no address pool on this server/);
  } finally {
    await s.close();
  }
});

test('enabled false goes DEACTIVATING then DEACTIVATED, and enabled again leaves DEACTIVATED', async () => {
  const s = await startTestServer();
  try {
    await create(s, '/jobs', JOB('nightly', false));
    const off = await waitFor(s, '/jobs/nightly', statusIs('DEACTIVATED'));
    assert.deepEqual(steps(off), ['DEPLOYING', 'DEACTIVATING', 'DEACTIVATED']);
    const put = await s.api('/jobs/nightly', { method: 'PUT', json: JOB('nightly', true) });
    assert.equal(put.status, 200);
    const on = await waitFor(s, '/jobs/nightly', (b) => b.events.length > off.events.length);
    assert.notEqual(on.status, 'DEACTIVATED');
    assert.equal(on.events[off.events.length].status, 'DEPLOYING', 'a re-enabled object deploys again');
  } finally {
    await s.close();
  }
});

test('DELETE answers DELETING and the object is gone once the controller finishes', async () => {
  const s = await startTestServer();
  try {
    await create(s, '/vpcs', { metadata: { name: 'net' }, spec: {} });
    await create(s, '/jobs', JOB('nightly'));
    await waitFor(s, '/vpcs/net', statusIs('DEPLOYED'));
    for (const path of ['/vpcs/net', '/jobs/nightly']) {
      const del = await s.api(path, { method: 'DELETE' });
      assert.equal(del.status, 200);
      assert.equal((await del.json()).status, 'DELETING');
      const gone = await waitFor(s, path, (_b, status) => status === 404);
      assert.equal(gone.code, 404);
    }
  } finally {
    await s.close();
  }
});

test('a server restarted on the same data finishes a deletion the stopped one left half-way', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-restart-'));
  try {
    const first = await startTestServer({}, { dataDir });
    await create(first, '/vpcs', { metadata: { name: 'net' }, spec: {} });
    await waitFor(first, '/vpcs/net', statusIs('DEPLOYED'));
    await first.close();

    // What a crash between the DELETE verb and the controller leaves behind.
    const store = new SqliteStore(join(dataDir, 'berth.db'));
    const key = { kind: 'Vpc', workspace: 'default', parent: '', name: 'net' };
    const o = (await store.get(key))!;
    const body = withEvent(structuredClone(o.body), 'DELETING', 'deletion requested', new Date());
    await store.write([{ op: 'update', key, body, expectVersion: o.resourceVersion }]);
    await store.close();

    const second = await startTestServer({}, { dataDir });
    try {
      await waitFor(second, '/vpcs/net', (_b, status) => status === 404);
    } finally {
      await second.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('an egress gateway whose region a restarted server no longer serves is FAILED, with the reason', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-restart-'));
  try {
    const first = await startTestServer({ BERTH_REGIONS: 'local,eu-west' }, { dataDir });
    await create(first, '/vpcs', { metadata: { name: 'net' }, spec: {} });
    await create(first, '/vpcs/net/egressgateways', {
      metadata: { name: 'gw' },
      spec: { region: 'eu-west' },
    });
    await waitFor(first, '/vpcs/net/egressgateways/gw', statusIs('DEPLOYED'));
    await first.close();

    const second = await startTestServer({ BERTH_REGIONS: 'local' }, { dataDir });
    try {
      const gw = await waitFor(second, '/vpcs/net/egressgateways/gw', statusIs('FAILED'));
      assert.match(
        gw.events.at(-1).message,
        /region "eu-west" is not configured on this server; known: local/,
      );
      const vpc = await (await second.api('/vpcs/net')).json();
      assert.equal(vpc.status, 'DEPLOYED', 'the VPC itself is still fine');
    } finally {
      await second.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
