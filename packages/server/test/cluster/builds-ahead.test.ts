// Agents keep answering when the leader dies (docs/decisions/067-builds-ahead.md): three `berth serve` on one
// PostgreSQL, an agent deployed through the leader. Every follower has the agent's app ahead, copied from the leader
// rather than built again (decision 094; seen in its /metrics and its data dir); after kill -9 of the leader the new one starts the agent without building it (no build event, its
// build log untouched), and calls sent through the remaining follower during the failover are held until the new
// leader answers them, not refused.
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { newTenant } from '../../src/test-support/tenants.js';
import { berth } from '../berth-cli.js';
import { type Proc, sleep, useCluster } from './cluster-support.js';

const REPO = join(import.meta.dirname, '../../../..');
const AGENT = 'agent-python';

describe('followers build ahead; a failover is waited out, not refused', () => {
  const cluster = useCluster(['node-a', 'node-b', 'node-c'], { prefix: 'ahead' });
  const { api } = cluster;
  let work: string;
  let app = '';
  const appDir = (p: Proc) => join(p.dir, 'builds', 'workspaces', 'default');

  /** The count of builds ahead with `outcome` in `p`'s /metrics. */
  const aheadCount = async (p: Proc, outcome: string) => {
    const text = await (await fetch(`${p.url}/metrics`)).text();
    const m = text.match(new RegExp(`^berth_builds_ahead_total\\{outcome="${outcome}"\\} (\\d+)`, 'm'));
    return m ? Number(m[1]) : undefined;
  };

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'berth-ahead-'));
    cpSync(join(REPO, 'templates', AGENT), join(work, AGENT), { recursive: true });
    const r = await berth({ url: cluster.node('node-a').url, adminKey: cluster.key }, [
      'deploy',
      join(work, AGENT),
    ]);
    assert.equal(r.code, 0, r.out);
    const o = await (await api(cluster.node('node-a'), `/agents/${AGENT}`)).json();
    const rec = (o.revisions ?? []).find((x: any) => x.id === o.activeRevision);
    assert.ok(rec?.app, JSON.stringify(o));
    app = rec.app;
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it("each follower holds the agent's built app, copied ahead from the leader (its /metrics and data dir say so); the leader built none ahead", async () => {
    for (const id of ['node-b', 'node-c']) {
      const p = cluster.node(id);
      for (let i = 0; i < 600 && !((await aheadCount(p, 'copied')) ?? 0); i++) await sleep(100);
      // The leader built it; each follower copied its bytes rather than building it again (decision 094).
      assert.equal(await aheadCount(p, 'copied'), 1, id);
      assert.equal(await aheadCount(p, 'built'), 0, id);
      assert.equal(await aheadCount(p, 'failed'), 0, id);
      assert.ok(existsSync(join(appDir(p), 'apps', `${app}.json`)), `${id} has no app ${app}`);
    }
    assert.equal(await aheadCount(cluster.node('node-a'), 'built'), 0);
  });

  /** When the leader was killed, and node-b's build log of the app as it was then (none: never built there). */
  let killedAt = 0;
  let logBefore: number | undefined;
  const logOf = (p: Proc) => join(appDir(p), 'logs', `${app}.log`);

  it('kill -9 of the leader: calls sent through a follower during the failover are held, then answered', async () => {
    const [b, c] = [cluster.node('node-b'), cluster.node('node-c')];
    // node-c may not lead: it stays a follower, whose calls must wait for node-b.
    assert.equal((await api(c, '/nodes/node-c/drain', { method: 'POST' })).status, 200);
    assert.equal((await cluster.run(c, `agents/${AGENT}`, { inputs: 'before' })).status, 200);
    const other = await newTenant(cluster.server(b), 'tenant-ahead');
    logBefore = existsSync(logOf(b)) ? statSync(logOf(b)).mtimeMs : undefined;
    await cluster.kill('node-a');
    killedAt = Date.now();
    // Another tenant's call, held the same way, is refused by the new leader.
    const theirsCall = cluster.run(c, `agents/${AGENT}`, { inputs: 'theirs' }, other.key);
    // Calls through the follower in the failover window, every 200 ms for 3 s, each awaited on its own.
    const calls: Promise<{ status: number; body: string; at: number }>[] = [];
    for (let i = 0; i < 15; i++) {
      calls.push(
        cluster
          .run(c, `agents/${AGENT}`, { inputs: `held ${i}` })
          .then(async (r) => ({ status: r.status, body: await r.text(), at: Date.now() - killedAt })),
      );
      await sleep(200);
    }
    const answers = await Promise.all(calls);
    const theirs = await theirsCall;
    const first = Math.min(...answers.map((a) => a.at));
    process.stdout.write(
      `# kill -9 of the leader: first held call answered after ${first} ms (load ${loadavg()[0].toFixed(1)})\n`,
    );
    for (const [i, a] of answers.entries()) {
      assert.equal(a.status, 200, `call ${i}: ${a.status} ${a.body}`);
      assert.equal(JSON.parse(a.body).output, `HELD ${i}`);
    }
    assert.ok([403, 404].includes(theirs.status), `another tenant's call: ${theirs.status}`);
    assert.equal((await cluster.nodes(b)).find((n) => n.id === 'node-b')?.leads.join(), 'controllers');
  });

  it('the new leader started the agent without building it: no build event since the kill, its build log untouched', async () => {
    assert.ok(killedAt > 0, 'the leader was not killed');
    const b = cluster.node('node-b');
    let o: any;
    for (let i = 0; i < 600; i++) {
      o = await (await api(b, `/agents/${AGENT}`)).json();
      if (
        o.status === 'DEPLOYED' &&
        (await cluster.run(b, `agents/${AGENT}`, { inputs: 'x' })).status === 200
      )
        break;
      await sleep(100);
    }
    assert.equal(o.status, 'DEPLOYED', JSON.stringify(o.events));
    const since = (o.events ?? []).filter((e: any) => Date.parse(e.time) >= killedAt - 1000);
    assert.deepEqual(
      since.filter((e: any) => /^build(ing|t) /.test(e.message)),
      [],
      JSON.stringify(o.events),
    );
    assert.ok(logBefore !== undefined, 'node-b had not built the app before the kill');
    assert.equal(statSync(logOf(b)).mtimeMs, logBefore, 'node-b built the agent again');
  });
});
