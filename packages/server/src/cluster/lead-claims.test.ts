// A lead's claims in the `nodes` table (docs/decisions/080-leader-session-mark.md): what a server writes there about
// leading — its heartbeat's `leads`, the claims a new leader clears (formerLeaders), a drained leader's hand-over —
// lands only while its lock session still holds the lead. A leader whose session was ended behind its back, and
// which has not noticed yet, neither claims the lead again after the next leader cleared its claim, nor clears the
// next leader's claim, nor leaves a hand-over behind.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pg from 'pg';
import { testPostgres } from '../test-support/store-drivers.js';
import { type Leadership, type LeadSession, postgresLeadership } from './leadership.js';
import { formerLeaders, type Nodes, postgresNodes } from './nodes.js';

const ROLE = 'controllers';

async function until(what: string, f: () => boolean | Promise<boolean>, ms = 10_000) {
  const end = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("a lead's claims in the nodes table", () => {
  test('written only while the lock session holds the lead: a deposed leader neither claims, clears nor hands over', async () => {
    const url = await (await testPostgres()).database();
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    const open: Leadership[] = [];
    const nodes: Nodes[] = [];
    try {
      /** A server: its leadership (checking its session only once a minute) and its node registry. */
      const server = async (id: string) => {
        let session: LeadSession | undefined;
        const l = postgresLeadership({
          url,
          retryMs: 50,
          checkMs: 60_000,
          onLost: () => undefined,
          warn: () => undefined,
          info: () => undefined,
        });
        open.push(l);
        await l.lead(ROLE, {
          start: async (s) => {
            session = s;
          },
          stop: async () => undefined,
        });
        await until(`${id} to lead`, () => l.leads().includes(ROLE));
        const n = await postgresNodes(url, {
          self: { id, address: `http://${id}.invalid`, region: 'local', cores: 1, memoryMb: 1024 },
          instances: async () => 0,
          leads: () => l.leads(),
          leadFence: (role) => l.fence(role),
          leaseMs: 60_000,
          warn: () => undefined,
        });
        nodes.push(n);
        return { l, n, session: session as LeadSession };
      };
      const row = async (id: string) =>
        (await admin.query('SELECT leads, handed_over FROM nodes WHERE id = $1', [id])).rows[0];
      const claimants = async () =>
        (
          await admin.query(`SELECT id FROM nodes WHERE $1 = ANY (string_to_array(leads, ',')) ORDER BY id`, [
            ROLE,
          ])
        ).rows.map((r) => r.id);

      const old = await server('a-old');
      assert.deepEqual(await claimants(), ['a-old'], 'a leader claims its lead');

      // Its lock session ends behind its back; it has not noticed (it still leads, with the same fence).
      const { pid } = old.l.fence(ROLE) ?? assert.fail('the old leader has a fence');
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
      await until(
        'the old session to go',
        async () => (await admin.query('SELECT 1 FROM pg_locks WHERE pid = $1', [pid])).rowCount === 0,
      );
      const next = await server('b-next');
      assert.deepEqual(await formerLeaders(next.session, ROLE, 'b-next'), ['a-old']);
      await next.n.beat();
      assert.deepEqual(await claimants(), ['b-next']);
      assert.deepEqual(old.l.leads(), [ROLE], 'the old leader has not noticed');

      // Its heartbeat does not claim the lead again: followers would send the leader's requests to it.
      await old.n.beat();
      assert.deepEqual(await claimants(), ['b-next'], "the deposed leader's heartbeat claims nothing");
      assert.equal((await row('a-old')).leads, '');

      // On its ended session it clears nobody's claim and leaves no hand-over.
      await assert.rejects(formerLeaders(old.session, ROLE, 'a-old'));
      await assert.rejects(old.n.handOver(ROLE, old.session));
      assert.deepEqual(await claimants(), ['b-next'], "the next leader's claim stays");
      assert.equal((await row('a-old')).handed_over, '', 'no hand-over written after the lead was lost');

      // The leader's own hand-over, on its live session, lands.
      await next.n.handOver(ROLE, next.session);
      assert.deepEqual(await row('b-next'), { leads: '', handed_over: ROLE });
    } finally {
      for (const n of nodes) await n.close();
      for (const l of open) await l.close();
      await admin.end();
    }
  });
});
