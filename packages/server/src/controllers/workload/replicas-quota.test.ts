// The replica set under a workspace's quotas, with the fake runtime and one fake sandbox daemon (a unix socket
// answering POST /process as a started app): scale-out stops at the quota and says so on the object (an event);
// another workload of the workspace waits to deploy, another workspace does not; a redeploy does not count the
// replicas it replaces; a workload with no replica and no room answers 429 naming the quota.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { QuotaLimits } from '../../config.js';
import { SecretBox } from '../../crypto/secret-box.js';
import { ApiError } from '../../errors.js';
import { agent } from '../../kinds/agent.js';
import { FakeDriver } from '../../runtime/fake.js';
import { Instances } from '../../runtime/instances.js';
import { Resources } from '../../store/resources.js';
import { SqliteStore } from '../../store/sqlite.js';
import { workloadEvent } from '../core/events.js';
import { QuotaLedger } from '../core/quota-ledger.js';
import { ReplicaQuotaError, ReplicaSet, type RevisionRun, type Workload } from './replicas.js';

const LIMITS: QuotaLimits = { memoryMb: 2000, sandboxes: 10, replicas: 3, builds: 1, jobTasks: 1 };

class OneSocketDriver extends FakeDriver {
  constructor(private readonly socket: string) {
    super();
  }
  override socketPath(): string {
    return this.socket;
  }
}

const run = (id: string, memoryMb = 256): RevisionRun => ({
  id,
  appDir: '/nonexistent/app',
  start: 'node server.js',
  memoryMb,
  envs: {},
  minScale: 0,
  maxScale: 10,
  volumes: [],
});

describe('replicas under the workspace quotas', () => {
  let dir: string;
  let daemon: Server;
  let store: SqliteStore;
  let ledger: QuotaLedger;
  let resources: Resources;
  let set: ReplicaSet;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-rq-'));
    const socket = join(dir, 'daemon.sock');
    // Every app "starts" and listens at once.
    daemon = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ name: 'app', pid: 1, status: 'running', exitCode: 0, logs: '' }));
      });
    });
    await new Promise<void>((r) => daemon.listen(socket, r));
    store = new SqliteStore(join(dir, 'berth.db'));
    ledger = new QuotaLedger(store, LIMITS);
    await ledger.start();
    resources = new Resources(store, [agent], new SecretBox(randomBytes(32)), { regions: ['local'] });
    for (const [ws, name] of [
      ['a', 'x'],
      ['a', 'y'],
      ['b', 'z'],
    ])
      await resources.create(
        resources.kind('Agent'),
        { workspace: ws, parents: [], actor: 't' },
        {
          metadata: { name },
          spec: {},
        },
      );
    set = new ReplicaSet({
      instances: new Instances({ driver: new OneSocketDriver(socket) }),
      quota: ledger,
      onEvent: workloadEvent({ resources }),
    });
  });
  after(async () => {
    ledger.close();
    await store.close();
    daemon.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const deploy = (ws: string, name: string, r: RevisionRun) =>
    set.deploy({ workspace: ws, kind: 'Agent', name, public: false }, r);
  const live = (w: Workload) => w.replicas.filter((r) => !r.gone).length;
  const settle = async (w: Workload) => {
    while (w.extraStarts > 0) await new Promise((r) => setTimeout(r, 5));
  };
  const events = async (ws: string, name: string) =>
    ((await store.get({ kind: 'Agent', workspace: ws, parent: '', name }))?.body.events ?? []).map(
      (e: { message: string }) => e.message,
    );

  it("scale-out stops at the replicas quota, and the agent's events say so", async () => {
    await deploy('a', 'x', run('r1'));
    const x = set.get('a', 'Agent', 'x') as Workload;
    assert.equal(set.scaleOut(x, 8), 2, 'two more fit beside the first');
    await settle(x);
    assert.equal(live(x), 3);
    assert.equal(set.scaleOut(x, 8), 0);
    await new Promise((r) => setTimeout(r, 50));
    assert.ok(
      (await events('a', 'x')).includes("replicas capped at 3 by the workspace's replicas quota (3)"),
      JSON.stringify(await events('a', 'x')),
    );
    assert.equal(ledger.usage('a').replicas, 3);
  });

  it('another workload of the workspace waits to deploy; one of another workspace deploys', async () => {
    await assert.rejects(
      deploy('a', 'y', run('r2')),
      (e) => e instanceof ReplicaQuotaError && e.refusal.quota === 'replicas',
    );
    assert.equal(set.get('a', 'Agent', 'y'), undefined);
    assert.equal(ledger.usage('a').replicas, 3, 'the refused deploy holds nothing');
    await deploy('b', 'z', run('r3'));
    assert.equal(ledger.usage('b').replicas, 1);
  });

  it('a redeploy does not count the replicas it replaces, and leaves one', async () => {
    await deploy('a', 'x', run('r4'));
    const x = set.get('a', 'Agent', 'x') as Workload;
    assert.equal(x.run.id, 'r4');
    assert.equal(live(x), 1);
    assert.equal(ledger.usage('a').replicas, 1, 'the replaced replicas gave their slots back');
  });

  it('a workload with no replica and no room answers 429 naming the quota; a freed slot lets it start', async () => {
    await deploy('a', 'y', run('r5'));
    const y = set.get('a', 'Agent', 'y') as Workload;
    await set.scaleIn(y, y.replicas[0]);
    const x = set.get('a', 'Agent', 'x') as Workload;
    set.scaleOut(x, 3);
    await settle(x);
    const refused = await set.acquire(y, 10).then(
      () => assert.fail('a replica started past the quota'),
      (e) => e,
    );
    assert.ok(refused instanceof ApiError);
    assert.equal(refused.status, 429);
    assert.equal(refused.error, 'QUOTA_EXCEEDED');
    assert.match(refused.detail, /agent "y" has no replica running and none may start: .*replicas quota/);
    await set.scaleIn(x, x.replicas[0]);
    const r = await set.acquire(y, 10);
    assert.equal(r.gone, false);
  });

  it('memory caps replicas too, and says by which quota', async () => {
    await set.remove('a', 'Agent', 'x');
    await set.remove('a', 'Agent', 'y');
    await deploy('a', 'x', run('r6', 900));
    const x = set.get('a', 'Agent', 'x') as Workload;
    assert.equal(set.scaleOut(x, 3), 1, '900 + 900 MB fit in 2000 MB, a third does not');
    await settle(x);
    await new Promise((r) => setTimeout(r, 50));
    assert.match(
      (await events('a', 'x')).at(-1),
      /replicas capped at 2 by the workspace's memory quota \(2000 MB, 1800 MB in use\)/,
    );
    await set.remove('a', 'Agent', 'x');
    assert.equal(ledger.usage('a').memoryMb.replicas, 0);
  });
});
