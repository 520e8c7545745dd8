// The workload gateway through the gateway's one pipeline (startGateway on a plain HTTP server), in front of the
// replica set on the fake runtime with a stand-in daemon per instance, whose replicas' ports are a real HTTP app on a
// loopback address: a request reaches the agent's replica, counted in its load while it lasts; from zero, ONE
// replica is started for concurrent requests; a replica whose port refuses connections is dropped and the request
// goes to another; a private agent needs a credential, a public one not; an idle replica goes to standby through the
// one idle sweeper and a request wakes it; one that cannot be woken is dropped and the request goes to a new one.
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, request, type Server } from 'node:http';
import { describe, it } from 'node:test';
import { APP_PORT, ReplicaSet, type RevisionRun, type Workload } from '../controllers/workload/replicas.js';
import { Instances } from '../runtime/instances.js';
import { DaemonDriver } from '../test-support/fake-daemon.js';
import { gatewayParts } from '../test-support/gateway.js';

const RUN: RevisionRun = {
  id: 'r1',
  appDir: '/nonexistent/app',
  start: 'node app.js',
  memoryMb: 256,
  envs: {},
  minScale: 0,
  maxScale: 2,
  volumes: [],
};
/** Loopback addresses of this test's replicas: apart from other processes' (by pid) and from each other. */
const LOOPBACK = 2 + ((process.pid * 7) % 200);
const address = (n: number) => `127.0.${LOOPBACK}.${n}`;

/** The app every replica runs: answers its path; `hold` keeps an answer back until released. */
async function app(at: string, hold?: Promise<void>): Promise<{ close(): void }> {
  const s: Server = createServer(async (req, res) => {
    if (hold && req.url?.startsWith('/slow')) await hold;
    if (req.url === '/hop') {
      res.writeHead(200, { connection: 'X-Up-Hop', 'x-up-hop': 'v', 'x-up-kept': 'k' });
      return void res.end(JSON.stringify({ hop: req.headers['x-hop'], kept: req.headers['x-kept'] }));
    }
    res.end(JSON.stringify({ path: req.url }));
  });
  await new Promise<void>((r) => s.listen(APP_PORT, at, r));
  return {
    close() {
      s.close();
      s.closeAllConnections();
    },
  };
}

async function setup(
  opts: {
    addressOf?: (id: string) => string;
    standbyAfterS?: number;
    isPublic?: boolean;
    /** Not deployed on this server yet (a server that just took the lead), its object DEPLOYED with `revision`. */
    notYet?: { revision?: string };
  } = {},
) {
  const parts = await gatewayParts({ prefix: 'berth-wlgw-' });
  const { store, resources, adminKey } = parts;
  await resources.create(
    resources.kind('Agent'),
    { workspace: 'default', parents: [], actor: 't' },
    { metadata: { name: 'bot' }, spec: {} },
  );
  const driver = new DaemonDriver({ address: opts.addressOf ?? (() => address(1)) });
  const replicas = new ReplicaSet({ instances: new Instances({ driver }) });
  const deploy = () =>
    replicas.deploy(
      { workspace: 'default', kind: 'Agent', name: 'bot', public: opts.isPublic === true },
      RUN,
    );
  if (opts.notYet)
    await store.write([
      {
        op: 'update',
        key: { kind: 'Agent', workspace: 'default', parent: '', name: 'bot' },
        mutate: (cur) => ({ ...cur.body, status: 'DEPLOYED', activeRevision: opts.notYet?.revision }),
      },
    ]);
  else await deploy();
  const served = await parts.serve({
    driver,
    standbyAfterS: opts.standbyAfterS ?? 3600,
    workloads: { replicas },
  });
  const base = `${served.origin}/run/default/agents/bot`;
  return {
    driver,
    replicas,
    deploy,
    base,
    w: () => replicas.get('default', 'Agent', 'bot') as Workload,
    call: (path: string, key: string | null | undefined = adminKey) =>
      fetch(`${base}${path}`, { headers: key ? { authorization: `Bearer ${key}` } : {} }),
    async close() {
      await served.close();
      await replicas.remove('default', 'Agent', 'bot');
      await driver.close();
      await parts.close();
    },
  };
}

describe('the workload gateway', () => {
  it("sends a request to the agent's replica, counted in the replica's load while it lasts", async () => {
    let release!: () => void;
    const s = await app(address(1), new Promise<void>((r) => (release = r)));
    const env = await setup();
    try {
      const r = env.w().replicas[0];
      const answer = env.call('/slow?x=1');
      for (let i = 0; i < 200 && r.inflight === 0; i++) await new Promise((x) => setTimeout(x, 5));
      assert.equal(r.inflight, 1, 'reported in flight');
      release();
      const res = await answer;
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { path: '/slow?x=1' });
      assert.equal(r.inflight, 0);
    } finally {
      await env.close();
      s.close();
    }
  });

  it('starts ONE replica from zero for the requests that wait for it, and they are answered by it', async () => {
    const s = await app(address(1));
    const env = await setup();
    try {
      await env.replicas.scaleIn(env.w(), env.w().replicas[0]);
      const before = env.driver.creations;
      const answers = await Promise.all([1, 2, 3].map((i) => env.call(`/q${i}`)));
      assert.deepEqual(
        answers.map((a) => a.status),
        [200, 200, 200],
      );
      assert.equal(env.driver.creations - before, 1);
    } finally {
      await env.close();
      s.close();
    }
  });

  it('holds a call to a deployed agent whose replicas are not back yet (a new leader), and answers it once they are', async () => {
    const s = await app(address(1));
    const env = await setup({ notYet: { revision: 'r1' } });
    try {
      const call = env.call('/back');
      // Refused at once, without waiting: a caller without a credential.
      assert.equal((await env.call('/back', null)).status, 401);
      await new Promise((r) => setTimeout(r, 300));
      await env.deploy();
      const r = await call;
      assert.equal(r.status, 200);
      assert.deepEqual(await r.json(), { path: '/back' });
    } finally {
      await env.close();
      s.close();
    }
  });

  it('answers 503 at once for an agent never deployed: a deploy that follows does not answer it', async () => {
    const s = await app(address(1));
    const env = await setup({ notYet: {} });
    try {
      const call = env.call('/x');
      await new Promise((r) => setTimeout(r, 300));
      await env.deploy();
      assert.equal((await call).status, 503);
    } finally {
      await env.close();
      s.close();
    }
  });

  it('drops a replica whose port refuses connections and sends the request to another', async () => {
    // The first replica's address has nothing listening; those started after it have the app.
    let n = 0;
    const addrs = new Map<string, string>();
    const s = await app(address(3));
    const env = await setup({
      addressOf: (id) => {
        if (!addrs.has(id)) addrs.set(id, address(n++ === 0 ? 2 : 3));
        return addrs.get(id) as string;
      },
    });
    try {
      const dead = env.w().replicas[0];
      const res = await env.call('/hello');
      assert.equal(res.status, 200);
      assert.equal(dead.gone, true, 'the dead replica is dropped');
      assert.equal(await env.driver.inspect(dead.id), undefined);
    } finally {
      await env.close();
      s.close();
    }
  });

  it('asks a private agent’s caller for a credential; a public agent answers anyone', async () => {
    const s = await app(address(1));
    try {
      const priv = await setup();
      try {
        assert.equal((await priv.call('/', null)).status, 401);
      } finally {
        await priv.close();
      }
      const pub = await setup({ isPublic: true });
      try {
        assert.equal((await pub.call('/', null)).status, 200);
      } finally {
        await pub.close();
      }
    } finally {
      s.close();
    }
  });

  it('puts an idle replica to standby through the one idle sweeper, and a request wakes it', async () => {
    const s = await app(address(1));
    const env = await setup({ standbyAfterS: 0.2 });
    try {
      const r = env.w().replicas[0];
      let state = '';
      for (let i = 0; i < 200 && state !== 'frozen'; i++) {
        await new Promise((x) => setTimeout(x, 10));
        state = (await env.driver.inspect(r.id))?.state ?? '';
      }
      assert.equal(state, 'frozen', 'in standby');
      assert.equal((await env.call('/')).status, 200);
      assert.equal((await env.driver.inspect(r.id))?.state, 'running', 'woken by the request');
    } finally {
      await env.close();
      s.close();
    }
  });

  it('passes on no header that a Connection header names, either way', async () => {
    const s = await app(address(1));
    const env = await setup({ isPublic: true });
    try {
      // fetch() may not set Connection; a plain request may.
      const { status, headers, body } = await new Promise<{
        status?: number;
        headers: IncomingHttpHeaders;
        body: string;
      }>((resolve, reject) => {
        const q = request(`${env.base}/hop`, {
          headers: { connection: 'keep-alive, X-Hop', 'x-hop': '1', 'x-kept': '1' },
        });
        q.on('response', async (r) => {
          let b = '';
          for await (const c of r) b += c;
          resolve({ status: r.statusCode, headers: r.headers, body: b });
        });
        q.on('error', reject);
        q.end();
      });
      assert.equal(status, 200, body);
      assert.deepEqual(JSON.parse(body), { kept: '1' }, 'the request lost the header its Connection named');
      assert.equal(headers['x-up-hop'], undefined, 'the answer lost the header its Connection named');
      assert.equal(headers['x-up-kept'], 'k');
    } finally {
      await env.close();
      s.close();
    }
  });

  it('drops a replica that cannot be woken and sends the request to a new one', async () => {
    const s = await app(address(1));
    const env = await setup({ standbyAfterS: 0.2 });
    try {
      const r = env.w().replicas[0];
      for (let i = 0; i < 200 && (await env.driver.inspect(r.id))?.state !== 'frozen'; i++)
        await new Promise((x) => setTimeout(x, 10));
      assert.equal((await env.driver.inspect(r.id))?.state, 'frozen', 'in standby');
      // Its sandbox went from under the runtime while frozen: every thaw of it fails.
      const thaw = env.driver.thaw.bind(env.driver);
      env.driver.thaw = async (id) => {
        if (id === r.id) throw new Error('its freezer cgroup is gone');
        return thaw(id);
      };
      const res = await env.call('/after');
      assert.equal(res.status, 200, await res.text());
      assert.equal(r.gone, true, 'the replica that cannot be woken is dropped');
      assert.notEqual(env.w().replicas[0]?.id, r.id, 'a new replica answered');
      assert.equal((await env.call('/again')).status, 200, 'and the next request too');
    } finally {
      await env.close();
      s.close();
    }
  });
});
