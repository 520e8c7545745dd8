// Built apps across the nodes of a cluster (docs/decisions/094-built-apps-across-nodes.md): two `berth serve` on one
// PostgreSQL, builds ahead off (so the copy is the replica holding's, when a slot lands on the second node), the
// Python agent template deployed through the leader. A copy whose bytes rotted on the holder is refused, nothing of it
// kept, and asked again; once the holder's bytes are right the second node copies it, and its replica serves: the app
// was built once in the cluster (one `building` event, the second node's log says it was copied, not built), and both
// nodes hold the very bytes the revision recorded (the archive digest). Another workspace's request for the app, with
// the cluster's token, is a 404, and so is any request without the token. An agent built from a Dockerfile runs on
// the second node as the leader's image, copied through the image routes, with no step of it run there.
import assert from 'node:assert/strict';
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { appArchiveDigest } from '../../src/builds/app-archive.js';
import {
  nodeLayer,
  Pusher,
  startRegistry,
  toolsLayer,
} from '../../src/runtime/images/test-support/registry.js';
import { OUTBOUND_LOOPBACK } from '../../src/test-support/server.js';
import { PEER_TOKEN_HEADER, peerToken } from '../../src/crypto/peer-token.js';
import { newTenant } from '../../src/test-support/tenants.js';
import { berth } from '../berth-cli.js';
import { type Proc, sleep, useCluster } from './cluster-support.js';

const REPO = join(import.meta.dirname, '../../../..');
const AGENT = 'agent-python';

describe('a built app is built once in a cluster and copied to the other nodes', () => {
  const cluster = useCluster(['node-a', 'node-b'], {
    prefix: 'app-copies',
    // Loopback open: the Dockerfile agent's FROM is pulled from a registry of the test.
    env: { BERTH_BUILDS_AHEAD: 'false', ...OUTBOUND_LOOPBACK },
  });
  const { api } = cluster;
  let work: string;
  let rec: { app: string; appDigest?: string; id: string };
  const apps = (p: Proc) => join(p.dir, 'builds', 'workspaces', 'default', 'apps');
  const agent = async () => (await api(cluster.node('node-a'), `/agents/${AGENT}`)).json();
  const metric = async (p: Proc, outcome: string) => {
    const text = await (await fetch(`${p.url}/metrics`)).text();
    const m = text.match(new RegExp(`^berth_app_copies_total\\{outcome="${outcome}"\\} (\\d+)`, 'm'));
    return m ? Number(m[1]) : undefined;
  };
  /** A file of the agent's built app on the leader (the holder). */
  let rotted = '';
  let good: Buffer;

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'berth-app-copies-'));
    cpSync(join(REPO, 'templates', AGENT), join(work, AGENT), { recursive: true });
    const r = await berth({ url: cluster.node('node-a').url, adminKey: cluster.key }, [
      'deploy',
      join(work, AGENT),
    ]);
    assert.equal(r.code, 0, r.out);
    let o: any;
    for (let i = 0; i < 600; i++) {
      o = await agent();
      if (o.status === 'DEPLOYED') break;
      await sleep(100);
    }
    assert.equal(o.status, 'DEPLOYED', JSON.stringify(o.events?.slice(-3)));
    rec = (o.revisions ?? []).find((x: any) => x.id === o.activeRevision);
    assert.ok(rec?.app, JSON.stringify(o));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('records the digest of the built app with its revision, taken from the files the build made', async () => {
    assert.match(String(rec.appDigest), /^sha256:[0-9a-f]{64}$/);
    const a = cluster.node('node-a');
    assert.equal((await appArchiveDigest(join(apps(a), rec.app))).digest, rec.appDigest);
    assert.equal(JSON.parse(readFileSync(join(apps(a), `${rec.app}.json`), 'utf8')).archive, rec.appDigest);
    // Builds ahead are off and no slot is on node-b yet: it holds nothing.
    assert.equal(existsSync(join(apps(cluster.node('node-b')), `${rec.app}.json`)), false);
  });

  it('a copy whose bytes rotted on the holder is refused, nothing of it kept, and asked again', async () => {
    const a = cluster.node('node-a');
    const b = cluster.node('node-b');
    const dir = join(apps(a), rec.app);
    const py = readdirSync(dir).find((f) => f.endsWith('.py'));
    assert.ok(py, readdirSync(dir).join(' '));
    rotted = join(dir, py);
    good = readFileSync(rotted);
    appendFileSync(rotted, '\n# rot\n');
    const o = await agent();
    const put = await api(a, `/agents/${AGENT}`, {
      method: 'PUT',
      json: {
        metadata: { name: AGENT },
        spec: { ...o.spec, runtime: { ...o.spec.runtime, minScale: 2, memory: 256 } },
      },
    });
    assert.equal(put.status, 200, await put.text());
    for (let i = 0; i < 300 && !((await metric(b, 'refused')) ?? 0); i++) await sleep(100);
    // Restored at once: node-b asks again at its next pass (2 s on), before it would give up and build.
    writeFileSync(rotted, good);
    assert.ok(((await metric(b, 'refused')) ?? 0) >= 1, 'node-b never refused the rotted copy');
    assert.equal(await metric(b, 'copied'), 0);
    assert.equal(existsSync(join(apps(b), `${rec.app}.json`)), false);
    assert.deepEqual(
      (existsSync(apps(b)) ? readdirSync(apps(b)) : []).filter((f) => f.startsWith(rec.app)),
      [],
      'nothing of the refused copy left',
    );
  });

  it("the second node's replica runs the copy: built once in the cluster, the same bytes on both nodes", async () => {
    const a = cluster.node('node-a');
    const b = cluster.node('node-b');
    let last: unknown;
    let served = false;
    for (let i = 0; i < 600 && !served; i++) {
      const list = await cluster.nodes(a);
      last = list.map((n) => [n.id, n.serving]);
      served = ['node-a', 'node-b'].every((id) =>
        list.some((n) => n.id === id && (n.serving ?? []).includes(`Agent/default/${AGENT}`)),
      );
      if (!served) await sleep(100);
    }
    assert.ok(served, `node-b never served the agent: ${JSON.stringify(last)}`);
    assert.equal(await metric(b, 'copied'), 1);
    // Built once: one build in the object's events, and node-b's log of the app says it was copied.
    const o = await agent();
    for (const status of ['BUILDING', 'BUILT'])
      assert.equal(
        (o.events ?? []).filter((e: any) => e.status === status).length,
        1,
        JSON.stringify(o.events),
      );
    const log = readFileSync(join(b.dir, 'builds/workspaces/default/logs', `${rec.app}.log`), 'utf8');
    assert.match(
      log,
      new RegExp(
        `berth: copied from ${new URL(a.url).host} \\(archive ${rec.appDigest}, \\d+ bytes, \\d+ ms\\): not built here\\n$`,
      ),
    );
    // The same bytes: node-b's app hashes to the digest its revision recorded at the build on node-a.
    assert.equal((await appArchiveDigest(join(apps(b), rec.app))).digest, rec.appDigest);
    assert.equal(JSON.parse(readFileSync(join(apps(b), `${rec.app}.json`), 'utf8')).archive, rec.appDigest);
    // And node-b's replica answers.
    const seen = new Set<string>();
    for (let i = 0; i < 200 && !seen.has('node-b'); i++) {
      const r = await cluster.run(b, `agents/${AGENT}`, { inputs: `c${i}` });
      assert.equal(r.status, 200, await r.text());
      seen.add(r.headers.get('x-berth-node') ?? '');
      await sleep(50);
    }
    assert.ok(seen.has('node-b'), [...seen].join(' '));
  });

  it("another workspace's request for the app, with the cluster's token, is a 404; without the token, a 404", async () => {
    const t = await newTenant(cluster.server(cluster.node('node-a')), 'tenant-app-copies');
    const token = peerToken(Buffer.from(cluster.env.BERTH_MASTER_KEY, 'base64'));
    for (const p of cluster.procs) {
      const own = await fetch(`${p.url}/peer/apps/default/${rec.app}`, {
        headers: { [PEER_TOKEN_HEADER]: token },
      });
      const body = await own.text();
      assert.equal(own.status, 200, `${p.id}: ${body}`);
      assert.equal(JSON.parse(body).archive, rec.appDigest);
      const refused: [string, Record<string, string>][] = [
        [`/peer/apps/${t.home}/${rec.app}`, { [PEER_TOKEN_HEADER]: token }],
        [`/peer/apps/${t.home}/${rec.app}/archive`, { [PEER_TOKEN_HEADER]: token }],
        [`/peer/apps/default/${rec.app}`, {}],
        [`/peer/apps/default/${rec.app}/archive`, {}],
        [`/peer/apps/default/${rec.app}/archive`, { authorization: `Bearer ${t.key}` }],
        [`/peer/apps/default/${rec.app}/archive`, { authorization: `Bearer ${cluster.key}` }],
      ];
      for (const [path, headers] of refused) {
        const r = await fetch(`${p.url}${path}`, { headers });
        assert.equal(r.status, 404, `${p.id} ${path} ${Object.keys(headers)}: ${r.status}`);
        await r.body?.cancel();
      }
    }
  });

  it("an agent built from a Dockerfile runs on the second node as the leader's image, copied and not built again", async () => {
    const reg = await startRegistry();
    try {
      const base = (
        await new Pusher(reg).image('test/node', 'v1', [await toolsLayer('df-copy'), await nodeLayer()], {
          Env: ['PATH=/opt/node/bin:/bin'],
        })
      ).reference;
      const dir = join(work, 'df-copied');
      mkdirSync(dir);
      writeFileSync(
        join(dir, 'berth.toml'),
        'type = "agent"\nname = "df-copied"\n[runtime]\nmemory = 256\nminScale = 2\n',
      );
      writeFileSync(
        join(dir, 'server.js'),
        "require('node:http').createServer((q, r) => r.end(require('node:fs').readFileSync('baked.txt'))).listen(Number(process.env.PORT), process.env.HOST);\n",
      );
      // What RUN makes differs at each build (its time): a second build would give other bytes than the first.
      writeFileSync(
        join(dir, 'Dockerfile'),
        `FROM ${base}\nWORKDIR /srv\nCOPY server.js .\nRUN date +%s%N > baked.txt\nCMD ["node", "server.js"]\n`,
      );
      const a = cluster.node('node-a');
      const b = cluster.node('node-b');
      const r = await berth({ url: a.url, adminKey: cluster.key }, ['deploy', dir]);
      assert.equal(r.code, 0, r.out);
      const o = await (await api(a, '/agents/df-copied')).json();
      const built = (o.revisions ?? []).find((x: any) => x.id === o.activeRevision);
      assert.match(String(built?.appDigest), /^sha256:[0-9a-f]{64}$/, 'the image id recorded as its digest');
      const answers = new Map<string, string>();
      for (let i = 0; i < 600 && answers.size < 2; i++) {
        const res = await cluster.run(i % 2 ? a : b, 'agents/df-copied', {});
        if (res.status === 200) answers.set(res.headers.get('x-berth-node') ?? '', await res.text());
        else await res.body?.cancel();
        if (answers.size < 2) await sleep(100);
      }
      assert.deepEqual([...answers.keys()].sort(), ['node-a', 'node-b'], 'both nodes answer');
      assert.equal(
        answers.get('node-a'),
        answers.get('node-b'),
        "node-b runs the leader's build, not one of its own",
      );
      const log = readFileSync(join(b.dir, 'builds/workspaces/default/logs', `${built.app}.log`), 'utf8');
      assert.match(
        log,
        new RegExp(
          `copied from ${new URL(a.url).host} \\(image ${built.appDigest}, \\d+ ms\\): not built here`,
        ),
      );
      assert.equal(await metric(b, 'copied'), 2, "node-b's second copy (the Python agent's was the first)");
    } finally {
      await reg.stop();
    }
  });
});
