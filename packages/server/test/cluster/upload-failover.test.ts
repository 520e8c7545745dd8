// An upload URL across a failover (decision 082): issued by one server, taken by whichever leads when the zip comes,
// once; refused (404, saying why) when altered in any part, expired, signed with another key, used already, or
// turned by another tenant towards its own object. Two `berth serve` processes on one PostgreSQL; the leader is
// killed between the URL and the upload, with an agent's replica running on it: the agent is told, naming it.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { type UploadClaim, uploadToken } from '../../src/api/code-upload.js';
import { newTenant, type Tenant } from '../../src/test-support/tenants.js';
import { type Proc, sleep, useCluster } from './cluster-support.js';
import { putZip, templateZip, through } from './upload-support.js';

describe('an upload URL issued before a failover', () => {
  const cluster = useCluster(['node-a', 'node-b'], {
    prefix: 'upfail',
    env: { BERTH_PUBLIC_URL: 'http://berth.cluster.test' },
  });
  const { api } = cluster;
  let a: Proc;
  let b: Proc;
  let tenant: Tenant;
  const tokenOf = (url: string) => new URL(url).pathname.slice('/uploads/'.length);
  const claimOf = (url: string): UploadClaim =>
    JSON.parse(Buffer.from(tokenOf(url).split('.')[0], 'base64url').toString('utf8'));
  const withClaim = (url: string, claim: UploadClaim) =>
    `http://berth.cluster.test/uploads/${Buffer.from(JSON.stringify(claim)).toString('base64url')}.${tokenOf(url).split('.')[1]}`;
  const askUrl = async (p: Proc, name: string, key?: string) => {
    const r = await api(p, `/agents/${name}?upload=true`, {
      method: 'PUT',
      key,
      json: { metadata: { name }, spec: { runtime: { memory: 256 } } },
    });
    assert.equal(r.status, 200, await r.text());
    const url = r.headers.get('x-blaxel-upload-url') ?? '';
    assert.ok(url.startsWith('http://berth.cluster.test/uploads/'), url);
    return url;
  };
  const refused = async (p: Proc, url: string, why: RegExp) => {
    const r = await putZip(through(p, url), await templateZip('attack'));
    const body = await r.json();
    assert.equal(r.status, 404, JSON.stringify(body));
    assert.match(body.detail, why);
  };

  let url = '';
  let theirs = '';
  before(async () => {
    a = cluster.node('node-a');
    b = cluster.node('node-b');
    tenant = await newTenant(cluster.server(b), 'tenant-upfail');
  });

  const deployed = async (p: Proc, name: string) => {
    let o: any;
    for (let i = 0; i < 600; i++) {
      o = await (await api(p, `/agents/${name}`)).json();
      if (o.status === 'DEPLOYED' || o.status === 'FAILED') break;
      await sleep(100);
    }
    assert.equal(o.status, 'DEPLOYED', JSON.stringify(o.events));
    return o;
  };

  it('a URL issued by the leader is taken by the new leader after the old one was killed; the deploy goes on', async () => {
    assert.deepEqual((await cluster.nodes(b)).find((n) => n.id === 'node-a')?.leads, ['controllers']);
    // The agent runs a replica on the leader, which its heartbeats report (every half second here).
    const first = await putZip(through(a, await askUrl(a, 'up')), await templateZip('first'));
    assert.equal(first.status, 200, await first.text());
    assert.ok((await deployed(a, 'up')).replicas >= 1);
    await sleep(1200);
    url = await askUrl(a, 'up');
    theirs = await askUrl(b, 'up', tenant.key);
    await cluster.kill('node-a');
    for (let i = 0; i < 100 && !(await cluster.nodes(b)).find((n) => n.id === 'node-b')?.leads.length; i++)
      await sleep(100);
    const up = await putZip(through(b, url), await templateZip());
    const stored = await up.json();
    assert.equal(up.status, 200, JSON.stringify(stored));
    const o = await deployed(b, 'up');
    assert.equal(o.source?.digest, stored.digest);
    // Its replica died with node-a: the agent is told so once, naming the node, when its placement moves the slot
    // (once node-a's lease lapsed).
    let events: any[] = o.events;
    const lostOf = () => events.filter((e: any) => e.message.startsWith('lost: node node-a'));
    for (let i = 0; i < 150 && !lostOf().length; i++) {
      await sleep(100);
      events = (await (await api(b, '/agents/up')).json()).events;
    }
    const lost = lostOf();
    assert.equal(lost.length, 1, JSON.stringify(events));
    assert.match(
      lost[0].message,
      /^lost: node node-a, which ran a replica of this agent, stopped; its processes and memory are gone; calls wait for the replica started again\. Node node-b starts it again/,
    );
  });

  it('refuses the URL used again, altered in any part, expired, or signed with another key', async () => {
    await refused(b, url, /was used already/);
    const claim = claimOf(url);
    const masterKey = Buffer.from(cluster.env.BERTH_MASTER_KEY, 'base64');
    // Each part of the claim changed, the signature kept: not one Berth issued.
    for (const altered of [
      { ...claim, n: 'other' },
      { ...claim, k: 'Function' },
      { ...claim, v: claim.v + 1_000_000 },
      { ...claim, e: claim.e + 60_000 },
      { ...claim, c: new Date(0).toISOString() },
    ])
      await refused(b, withClaim(url, altered), /not one Berth issued/);
    const [payload, sig] = tokenOf(url).split('.');
    await refused(b, `http://x/uploads/${payload}.${sig.slice(0, -2)}AA`, /not one Berth issued/);
    await refused(b, `http://x/uploads/${payload}`, /not one Berth issued/);
    // Signed as the cluster signs, but expired; and signed with another master key.
    const fresh = claimOf(await askUrl(b, 'up'));
    await refused(
      b,
      `http://x/uploads/${uploadToken(masterKey, { ...fresh, e: Date.now() - 1000 })}`,
      /expired at/,
    );
    await refused(b, `http://x/uploads/${uploadToken(Buffer.alloc(32, 7), fresh)}`, /not one Berth issued/);
  });

  it("another tenant can neither turn the first tenant's URL to its own object nor touch the first one's agent", async () => {
    const before = (await (await api(b, '/agents/up')).json()).source.digest;
    // The tenant's own URL, turned towards the first tenant's workspace, and the first tenant's URL towards the
    // tenant's: neither is one Berth issued.
    await refused(b, withClaim(theirs, { ...claimOf(theirs), w: 'default' }), /not one Berth issued/);
    const mine = await askUrl(b, 'up');
    await refused(b, withClaim(mine, { ...claimOf(mine), w: tenant.home }), /not one Berth issued/);
    // Its own URL (issued by the dead leader) puts its code in its own agent only.
    const up = await putZip(through(b, theirs), await templateZip('tenant'));
    const stored = await up.json();
    assert.equal(up.status, 200, JSON.stringify(stored));
    assert.equal(
      (await (await api(b, '/agents/up', { key: tenant.key })).json()).source?.digest,
      stored.digest,
    );
    assert.equal((await (await api(b, '/agents/up')).json()).source.digest, before);
  });
});
