// A leader cut from its lock session (docs/decisions/068-leader-fence.md): two `berth serve` processes on one
// PostgreSQL; the leader's advisory-lock session is ended behind its back (`pg_terminate_backend`, as an operator, a
// cut of that one connection or the database's side dropping it would), and it is told to check that session only
// every ten minutes, so it learns of the loss only from the database. The follower takes the lead; an egress IP made
// then is reconciled by both servers' controllers, which judge it differently (only the new leader has an address
// pool), so a write of the old leader would show: it must be refused, the old leader must stop (exit 75), and the
// object must carry the new leader's writes only.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pg from 'pg';
import { stopped } from '../serve-process.js';
import { type Proc, sleep, useCluster } from './cluster-support.js';

/** The controllers' lock (cluster/leadership.ts) as pg_locks shows it, in this database. */
const END_LEADER_SESSION = `SELECT pg_terminate_backend(pid) AS ended FROM pg_locks,
    (SELECT hashtextextended('berth leader controllers', 0) AS k) role
  WHERE locktype = 'advisory' AND granted AND objsubid = 1
    AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND classid = ((k >> 32) & 4294967295)::oid AND objid = (k & 4294967295)::oid`;

describe('a leader whose lock session is ended behind its back', () => {
  const cluster = useCluster(['node-a', 'node-b'], {
    prefix: 'leader-fence',
    envOf: (id): Record<string, string> =>
      id === 'node-a' ? { BERTH_LEADER_CHECK_EVERY: '600' } : { BERTH_EGRESS_GATEWAYS: 'gw=127.0.0.1' },
  });
  const { api } = cluster;
  const post = async (p: Proc, path: string, json: unknown) => {
    const r = await api(p, path, { method: 'POST', json });
    assert.equal(r.status, 200, await r.text());
  };
  const get = async (p: Proc, path: string) => (await api(p, path)).json();
  /** What `read` answers once `ok` holds of it (10 s at most). */
  const until = async <T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean) => {
    for (let i = 0; ; i++) {
      const v = await read();
      if (ok(v)) return v;
      assert.ok(i < 200, `${what}: ${JSON.stringify(v)}`);
      await sleep(50);
    }
  };
  const deployed = (o: any) => o.status === 'DEPLOYED';

  it('has its next controller write refused, stops (exit 75), and the object carries the new leader’s writes only', async () => {
    const a = cluster.node('node-a');
    const b = cluster.node('node-b');
    assert.deepEqual(
      (await cluster.nodes(b)).map((n) => [n.id, n.leads]),
      [
        ['node-a', ['controllers']],
        ['node-b', []],
      ],
    );
    await post(a, '/vpcs', { metadata: { name: 'net' }, spec: {} });
    await post(a, '/vpcs/net/egressgateways', { metadata: { name: 'gw' }, spec: {} });
    await until(
      'the leader never deployed the gateway',
      () => get(b, '/vpcs/net/egressgateways/gw'),
      deployed,
    );

    const sql = new pg.Client({ connectionString: cluster.env.BERTH_DATABASE_URL });
    await sql.connect();
    try {
      const { rows } = await sql.query<{ ended: boolean }>(END_LEADER_SESSION);
      assert.deepEqual(rows, [{ ended: true }], "the leader's lock session was ended");
    } finally {
      await sql.end();
    }
    await until(
      'the follower never took the lead',
      async () => (await cluster.nodes(b)).find((n) => n.id === 'node-b'),
      (self) => self.leads.includes('controllers'),
    );

    await post(b, '/vpcs/net/egressgateways/gw/ips', { metadata: { name: 'ip1' }, spec: {} });
    // The old leader's controllers act on the change as the new leader's do; the database refuses what they write,
    // and the refusal ends its lead at once (its own check would come only in ten minutes).
    const exited = await Promise.race([stopped(a.child).then(() => true), sleep(15_000).then(() => false)]);
    assert.ok(exited, `the old leader kept running: ${a.stderr()}`);
    assert.equal(a.child.exitCode, 75, a.stderr());
    assert.match(a.stderr(), /no longer leads/);

    const ip = await until(
      'the new leader never deployed the egress IP',
      () => get(b, '/vpcs/net/egressgateways/gw/ips/ip1'),
      deployed,
    );
    assert.equal(ip.spec.publicIp, '127.0.0.1');
    // The old leader, without a pool, would have written FAILED "… has no address pool on this server".
    const messages = (ip.events ?? []).map((e: any) => e.message);
    assert.ok(
      messages.every((m: string) => !/no address pool/.test(m)),
      `a write of the old leader landed: ${JSON.stringify(messages)}`,
    );
    const gw = await get(b, '/vpcs/net/egressgateways/gw');
    assert.equal(gw.status, 'DEPLOYED');
  });
});
