// The gateway's routing of agents on real replicas: a thread stays on one revision through a canary split, the
// host form `agt-<agent>-<ws>` and an http trigger's path reach the agent, a second agent cannot take a held path,
// and a request is cut after the idle limit (504 before any header) or after spec.runtime.timeout (stream cut).
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { getWithHost, type SandboxServer, startSandboxServer } from '../sandboxes/support.js';
import { berth } from '../berth-cli.js';

const FIXTURE = join(import.meta.dirname, 'fixtures/replica-echo');
const INFERENCE_HOST = 'run.berth.test';
/** The idle limit this server runs with (BERTH_REQUEST_IDLE_TIMEOUT): short, so the test waits little. */
const IDLE_S = 2;

describe('agent routing on real replicas', () => {
  let s: SandboxServer;
  let dir: string;
  const url = (path = '') => `${s.url}/run/default/agents/router${path}`;

  async function deployVersion(version: string) {
    const main = readFileSync(join(FIXTURE, 'main.py'), 'utf8').replace(
      'os.environ.get("FIXTURE_VERSION", "v1")',
      JSON.stringify(version),
    );
    writeFileSync(join(dir, 'main.py'), main);
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, 0, r.out);
    return (await (await s.api('/agents/router')).json()) as any;
  }

  /** PUTs the agent's spec with `change` applied and waits until it is DEPLOYED again (and `done` holds). */
  async function update(change: (spec: any) => void, done: (o: any) => boolean = () => true) {
    const cur = await (await s.api('/agents/router')).json();
    const spec = structuredClone(cur.spec);
    change(spec);
    const res = await s.api('/agents/router', {
      method: 'PUT',
      json: { metadata: { name: 'router' }, spec },
    });
    const put = await res.json();
    assert.equal(res.status, 200, JSON.stringify(put));
    const since = put.events.at(-1).time;
    let o: any;
    for (let i = 0; i < 400; i++) {
      o = await (await s.api('/agents/router')).json();
      if (o.status === 'DEPLOYED' && o.events.at(-1).time >= since && done(o)) return o;
      if (o.status === 'FAILED') assert.fail(JSON.stringify(o.events.at(-1)));
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail(`never DEPLOYED as wanted: ${JSON.stringify({ ...o, spec: o.spec })}`);
  }

  const call = async (path = '', headers: Record<string, string> = {}) => {
    const res = await s.run(url(path), { method: 'POST', json: { inputs: 'x' }, headers });
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    return body;
  };

  before(async () => {
    s = await startSandboxServer({
      BERTH_INFERENCE_HOST: INFERENCE_HOST,
      BERTH_REQUEST_IDLE_TIMEOUT: String(IDLE_S),
    });
    dir = mkdtempSync(join(tmpdir(), 'berth-route-'));
    cpSync(FIXTURE, dir, { recursive: true });
    writeFileSync(join(dir, 'berth.toml'), 'name = "router"\n[runtime]\nmemory = 256\n');
  });
  after(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a thread stays on one revision through a 50% canary while other requests are split', async () => {
    const v1 = (await deployVersion('v1')).activeRevision;
    const v2 = (await deployVersion('v2')).activeRevision;
    await update(
      (spec) => {
        spec.revision = { active: v1, canary: v2, canaryPercent: 50, stickySessionTtl: 60 };
      },
      (o) => o.activeRevision === v1 && o.canaryRevision === v2,
    );
    for (const [header, thread] of [
      ['x-service-thread-id', 'thread-a'],
      ['x-blaxel-thread-id', 'thread-b'],
      ['thread-id', 'thread-c'],
    ]) {
      const answers = [];
      for (let i = 0; i < 30; i++) answers.push(await call('', { [header]: thread }));
      const served = new Set(answers.map((a) => `${a.version}/${a.replica}`));
      assert.equal(served.size, 1, `${header}: one revision and replica, got ${[...served].join(', ')}`);
      if (header !== 'x-blaxel-thread-id') {
        // The fixture counts turns of the header it reads: the replica saw the header, passed through.
        assert.deepEqual(
          answers.map((a) => a.turn),
          answers.map((_, i) => i + 1),
        );
      }
    }
    const free = new Set<string>();
    for (let i = 0; i < 40; i++) free.add((await call()).version);
    assert.deepEqual([...free].sort(), ['v1', 'v2'], 'requests without a thread are split');
  });

  it('the host form agt-<agent>-<ws> reaches the agent; metadata.url shows it', async () => {
    const o = await (await s.api('/agents/router')).json();
    const port = new URL(s.url).port;
    assert.equal(o.metadata.url, `http://agt-router-default.local.${INFERENCE_HOST}:${port}`);
    const host = `agt-router-default.local.${INFERENCE_HOST}:${port}`;
    const res = await getWithHost(`${s.url}/hello?x=1`, host, { authorization: `Bearer ${s.adminKey}` });
    assert.equal(res.status, 200, res.body);
    assert.equal(JSON.parse(res.body).path, '/hello?x=1');
    const anon = await getWithHost(`${s.url}/hello`, host);
    assert.equal(anon.status, 401, 'the host form asks for a credential like the path form');
    const unknown = await getWithHost(`${s.url}/`, `agt-nobody-default.local.${INFERENCE_HOST}:${port}`, {
      authorization: `Bearer ${s.adminKey}`,
    });
    assert.ok(unknown.status === 403 || unknown.status === 404, `${unknown.status} ${unknown.body}`);
  });

  it('an http trigger path serves the agent under the workspace; another agent cannot take it', async () => {
    await update(
      (spec) => {
        spec.revision = {};
        spec.triggers = [{ id: 'web', type: 'http', configuration: { path: 'team/router' } }];
      },
      (o) => o.canaryRevision === undefined,
    );
    const body = await (
      await s.run(`${s.url}/run/default/team/router/chat?q=1`, { method: 'POST', json: {} })
    ).json();
    assert.equal(body.path, '/chat?q=1');
    const other = await s.api('/agents/squatter', {
      method: 'PUT',
      json: {
        metadata: { name: 'squatter' },
        spec: { triggers: [{ type: 'http', configuration: { path: '/team/router' } }] },
      },
    });
    assert.equal(other.status, 409);
    const problem = await other.json();
    assert.match(problem.detail, /the path team\/router is already used by Agent "router" of this workspace/);
  });

  it('no byte for the idle limit: 504 before any header; runtime.timeout cuts a stream that never pauses', async () => {
    // The replica would answer 200 after 6 s: the 504 is the gateway's.
    const slow = await s.run(url('/sleep?s=6'), { method: 'POST', json: {} });
    assert.equal(slow.status, 504);
    assert.equal(slow.headers.get('content-type'), 'application/problem+json');
    assert.match((await slow.json()).detail, /no byte in either direction for 2 s/);
    // Bytes every 0.4 s keep a request alive past the idle limit (3.2 s in all).
    const drip = await s.run(url('/drip?n=8&every=0.4'), { method: 'POST', json: {} });
    assert.equal(drip.status, 200);
    assert.equal((await drip.text()).split('\n').filter(Boolean).length, 8);
    // With runtime.timeout 2 s, an 8 s stream is cut once its headers have left: the body ends short.
    await update((spec) => {
      spec.runtime.timeout = 2;
    });
    const long = await s.run(url('/drip?n=20&every=0.4'), { method: 'POST', json: {} });
    assert.equal(long.status, 200);
    let text = '';
    try {
      text = await long.text();
    } catch {
      // undici reports the cut as a terminated body.
    }
    assert.ok(text.split('\n').filter(Boolean).length < 20, `the stream was cut: ${JSON.stringify(text)}`);
  });
});
