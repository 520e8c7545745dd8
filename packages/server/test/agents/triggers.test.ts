// Triggers through the real gateway on real replicas: an http-async trigger's path runs the agent asynchronously
// and POSTs the signed result to that trigger's callbackUrl; a trigger's authenticationType decides who may call
// its own path while spec.public keeps deciding the default address; a schedule on a function is refused (an MCP
// server is called by MCP clients); a request that finds its replica dead before any byte of it was sent goes to
// another replica (one started for it, here), while one whose body had reached the dying replica gets a 502.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { berth } from '../berth-cli.js';
import { OUTBOUND_LOOPBACK } from '../../src/test-support/server.js';
import { type SandboxServer, startSandboxServer } from '../sandboxes/support.js';

const FIXTURE = join(import.meta.dirname, 'fixtures/replica-echo');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Retries `probe` until it holds: a spec change reaches the gateway's routing at the agent's next reconcile. */
async function eventually<T>(what: string, probe: () => Promise<T>, ok: (v: T) => boolean): Promise<T> {
  let v: T | undefined;
  for (let i = 0; i < 200; i++) {
    v = await probe();
    if (ok(v)) return v;
    await sleep(50);
  }
  assert.fail(`${what}: last ${JSON.stringify(v)}`);
}

describe('agent triggers on real replicas', () => {
  let s: SandboxServer;
  let dir: string;
  let receiver: Server;
  let callbackUrl: string;
  const received: { headers: IncomingHttpHeaders; body: string }[] = [];

  /** PUTs the agent's spec with `change` applied; answers the stored object. */
  async function update(name: string, change: (spec: any) => void) {
    const cur = await (await s.api(`/agents/${name}`)).json();
    const spec = structuredClone(cur.spec);
    change(spec);
    const res = await s.api(`/agents/${name}`, { method: 'PUT', json: { metadata: { name }, spec } });
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    return body;
  }

  /** A request with no credential at all. */
  const anonymous = (path: string) =>
    fetch(`${s.url}/run/default/${path}`, { method: 'POST', body: '{"inputs":"x"}' });

  before(async () => {
    // The callback receivers listen on loopback.
    s = await startSandboxServer({ ...OUTBOUND_LOOPBACK });
    dir = mkdtempSync(join(tmpdir(), 'berth-triggers-'));
    cpSync(FIXTURE, dir, { recursive: true });
    writeFileSync(join(dir, 'berth.toml'), 'name = "trig"\n[runtime]\nmemory = 256\n');
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, 0, r.out);
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        received.push({ headers: req.headers, body });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    callbackUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/cb`;
  });
  after(async () => {
    receiver?.close();
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('an http-async trigger path answers 202 and POSTs the signed result to that trigger’s callbackUrl', async () => {
    await update('trig', (spec) => {
      spec.triggers = [
        { id: 'sync', type: 'http', configuration: { path: 'team/sync' } },
        { id: 'later', type: 'http-async', configuration: { path: 'team/later', callbackUrl, retry: 1 } },
        { id: 'own', type: 'http-async', configuration: { path: 'agents/trig/async', callbackUrl } },
      ];
    });
    const res = await eventually(
      'the async path is served',
      () => s.run(`${s.url}/run/default/team/later/sub?x=1`, { method: 'POST', json: { inputs: 'x' } }),
      (r) => r.status !== 404 && r.status !== 200,
    );
    assert.equal(res.status, 202);
    const accepted = await res.json();
    assert.match(accepted.id, /^exec_/);
    assert.match(accepted.status_url, new RegExp(`/v0/agents/trig/executions/${accepted.id}$`));
    for (let i = 0; i < 200 && received.length === 0; i++) await sleep(50);
    assert.equal(received.length, 1, 'the result was POSTed to the trigger’s callbackUrl');
    const o = await (await s.api('/agents/trig?show_secrets=true')).json();
    const secret = o.spec.triggers.find((t: any) => t.id === 'later').configuration.callbackSecret;
    const payload = new Webhook(secret).verify(received[0].body, received[0].headers as any) as any;
    assert.equal(payload.data.executionId, accepted.id);
    assert.equal(payload.data.status, 'completed');
    assert.equal(JSON.parse(payload.data.output).path, '/sub?x=1', 'the app saw what follows the path');
    // The service's own form, a path under the agent's address: async too; the app sees what follows the path.
    const own = await s.run(`${s.url}/run/default/agents/trig/async`, { method: 'POST', json: {} });
    assert.equal(own.status, 202);
    const ownId = (await own.json()).id;
    for (let i = 0; i < 200 && received.length < 2; i++) await sleep(50);
    const ownSecret = o.spec.triggers.find((t: any) => t.id === 'own').configuration.callbackSecret;
    assert.notEqual(ownSecret, secret);
    const ownPayload = new Webhook(ownSecret).verify(received[1].body, received[1].headers as any) as any;
    assert.equal(ownPayload.data.executionId, ownId);
    assert.equal(JSON.parse(ownPayload.data.output).path, '/');
    // The http trigger's path of the same agent stays synchronous.
    const sync = await s.run(`${s.url}/run/default/team/sync/now`, { method: 'POST', json: {} });
    assert.equal(sync.status, 200);
    assert.equal((await sync.json()).path, '/now');
    // Another agent cannot take the async path.
    const other = await s.api('/agents/squatter', {
      method: 'PUT',
      json: {
        metadata: { name: 'squatter' },
        spec: { triggers: [{ type: 'http', configuration: { path: 'team/later' } }] },
      },
    });
    assert.equal(other.status, 409);
    assert.match((await other.json()).detail, /the path team\/later is already used by Agent "trig"/);
  });

  it('a trigger’s authenticationType decides its own path; spec.public keeps the default address', async () => {
    await update('trig', (spec) => {
      spec.public = false;
      spec.triggers = [
        { id: 'open', type: 'http', configuration: { path: 'team/open', authenticationType: 'public' } },
        { id: 'plain', type: 'http', configuration: { path: 'team/plain' } },
      ];
    });
    await eventually(
      'the public path opens',
      () => anonymous('team/open/x'),
      (r) => r.status === 200,
    );
    assert.equal((await anonymous('team/plain')).status, 401, 'no authenticationType: spec.public (false)');
    assert.equal((await anonymous('agents/trig')).status, 401, 'the default address still asks');
    await update('trig', (spec) => {
      spec.public = true;
      spec.triggers = [
        { id: 'shut', type: 'http', configuration: { path: 'team/shut', authenticationType: 'private' } },
        { id: 'plain', type: 'http', configuration: { path: 'team/plain' } },
      ];
    });
    await eventually(
      'the private path closes',
      () => anonymous('team/shut'),
      (r) => r.status === 401,
    );
    assert.equal((await anonymous('agents/trig')).status, 200, 'spec.public opens the default address');
    assert.equal((await anonymous('team/plain')).status, 200, 'no authenticationType: spec.public (true)');
    const withKey = await s.run(`${s.url}/run/default/team/shut`, { method: 'POST', json: {} });
    assert.equal(withKey.status, 200);
    const bad = await s.api('/agents/trig', {
      method: 'PUT',
      json: {
        metadata: { name: 'trig' },
        spec: { triggers: [{ type: 'http', configuration: { path: 'p', authenticationType: 'open' } }] },
      },
    });
    assert.equal(bad.status, 422);
    assert.match(JSON.stringify(await bad.json()), /must be one of \\"public\\", \\"private\\"/);
  });

  it('a schedule on a function is a 422 saying MCP servers are called by MCP clients; nothing is stored', async () => {
    for (const type of ['schedule', 'cron']) {
      const res = await s.api('/functions/tools', {
        method: 'PUT',
        json: {
          metadata: { name: 'tools' },
          spec: { triggers: [{ id: 'nightly', type, configuration: { schedule: '0 0 * * *' } }] },
        },
      });
      assert.equal(res.status, 422);
      const problem = JSON.stringify(await res.json());
      assert.match(problem, /\/spec\/triggers\/0\/type/);
      assert.match(problem, /called by MCP clients and cannot run on a schedule/);
    }
    assert.equal((await s.api('/functions/tools')).status, 404);
  });

  it('a replica found dead at connect is removed and the request goes to a new one; a sent request is not retried', async () => {
    const first = await (
      await s.run(`${s.url}/run/default/agents/trig/exit`, { method: 'POST', json: {} })
    ).json();
    // Let the gateway see the app's connection close, as it would for a replica that died a while ago.
    await sleep(300);
    const res = await s.run(`${s.url}/run/default/agents/trig/after`, { method: 'POST', json: {} });
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.equal(body.path, '/after');
    assert.notEqual(body.replica, first.replica, 'a new replica answered');
    // The agent says which replica crashed, how its app ended and what it printed last (decision 050).
    const crashed = await eventually(
      'the crash is said on the agent',
      async () => (await s.api('/agents/trig')).json(),
      (a: any) => a.events.some((e: any) => / crashed: /.test(e.message)),
    );
    assert.match(
      crashed.events.find((e: any) => / crashed: /.test(e.message)).message,
      /^replica wl-\S+ crashed: its start command \(.+\) ended \(completed, exit code 0\); its last output: "exiting: asked to by \/exit"\. It was removed; a new one starts when requests need it$/,
    );
    // The app reads the first byte of the body and exits: the request reached it, so it is not sent again.
    const dying = await s.run(`${s.url}/run/default/agents/trig/die-reading`, {
      method: 'POST',
      json: { inputs: 'x'.repeat(1000) },
    });
    assert.equal(dying.status, 502);
    assert.match(
      (await dying.json()).detail,
      /the replica of agent "trig" failed after the request was sent to it \(.+\); it was not retried/,
    );
    await sleep(300);
    const again = await s.run(`${s.url}/run/default/agents/trig/again`, { method: 'POST', json: {} });
    assert.equal(again.status, 200, 'the next request found the dead replica and went to a new one');
    // An asynchronous call that finds its replica dead goes to a new one too.
    await s.run(`${s.url}/run/default/agents/trig/exit`, { method: 'POST', json: {} });
    await sleep(300);
    const later = await s.run(`${s.url}/run/default/agents/trig?async=true`, { method: 'POST', json: {} });
    assert.equal(later.status, 202);
    const { id } = await later.json();
    const done = await eventually(
      'the asynchronous call ends',
      async () => (await s.api(`/agents/trig/executions/${id}`)).json(),
      (e: any) => e.status !== 'running',
    );
    assert.equal(done.status, 'completed', JSON.stringify(done));
  });
});
