// Agents from code, end to end on real sandboxes: `berth deploy` of a directory uploads it, a build sandbox builds
// it, a replica serves it through the gateway (private and public), an idle replica goes to standby and the next
// request wakes it; a broken build ends FAILED with its own log lines; a bad archive is refused at upload.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { verifyWebhookSignature } from '@blaxel/core';
import { Webhook } from 'standardwebhooks';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { OUTBOUND_LOOPBACK } from '../../src/test-support/server.js';
import { inspectingDriver, type SandboxServer, startSandboxServer } from '../sandboxes/support.js';
import { berth } from '../berth-cli.js';

const TEMPLATES = join(import.meta.dirname, '../../../../templates');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('agents from code', () => {
  let s: SandboxServer;
  let work: string;
  before(async () => {
    // The callback receivers listen on loopback.
    s = await startSandboxServer({ BERTH_STANDBY_AFTER: '1', ...OUTBOUND_LOOPBACK });
    work = mkdtempSync(join(tmpdir(), 'berth-agents-'));
  });
  after(async () => {
    await s.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('berth deploy of the Python template ends DEPLOYED and the agent answers through the gateway', async () => {
    const dir = join(work, 'py-agent');
    cpSync(join(TEMPLATES, 'agent-python'), dir, { recursive: true });
    writeFileSync(join(dir, 'berth.toml'), 'type = "agent"\nname = "py-agent"\n[runtime]\nmemory = 256\n');
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stderr, /^agent\/py-agent DEPLOYED in \S+: revision \S+ takes all traffic$/m);
    assert.match(r.stdout, /^http:\/\/\S+\/run\/default\/agents\/py-agent\n$/, 'stdout: the address alone');
    const url = `${s.url}/run/default/agents/py-agent`;
    const anon = await fetch(url, { method: 'POST', body: '{"inputs":"hi"}' });
    assert.equal(anon.status, 401, 'a private agent wants a credential');
    const res = await s.run(url, {
      method: 'POST',
      json: { inputs: 'hello' },
      headers: { 'thread-id': 't1' },
    });
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.equal(body.output, 'HELLO');
    const revs = await (await s.api('/agents/py-agent/revisions')).json();
    assert.equal(revs.length, 1);
    assert.equal(revs[0].active, true);
    const versioned = await (
      await s.api('/agents/py-agent/revisions', { headers: { 'Blaxel-Version': '2026-04-28' } })
    ).json();
    assert.deepEqual(versioned, { data: revs, meta: { hasMore: false } });
    const log = await (await s.api(`/agents/py-agent/revisions/${revs[0].id}/logs`)).text();
    assert.match(log, /no requirements: the standard library only/);

    // Idle past the standby delay: the replica is frozen; the next request thaws it and keeps its memory.
    await sleep(2500);
    const driver = await inspectingDriver(s.dataDir);
    try {
      const replicas = (await driver.list()).filter((i) => i.id.startsWith('wl-'));
      assert.deepEqual(
        replicas.map((i) => i.state),
        ['frozen'],
        'the one replica is in standby',
      );
    } finally {
      await driver.close();
    }
    const again = await s.run(url, {
      method: 'POST',
      json: { inputs: 'again' },
      headers: { 'thread-id': 't1' },
    });
    const b2 = await again.json();
    assert.equal(again.status, 200);
    assert.equal(b2.turn, 2, 'the same process answered after standby (its thread memory kept)');
  });

  it('?async=true answers 202 at once and POSTs the signed result to the callback, retried with the same id', async () => {
    const received: { headers: Record<string, any>; body: string }[] = [];
    const receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        received.push({ headers: req.headers, body });
        res.writeHead(received.length === 1 ? 500 : 204).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const port = (receiver.address() as { port: number }).port;
    try {
      const cur = await (await s.api('/agents/py-agent')).json();
      const spec = {
        ...cur.spec,
        triggers: [
          { type: 'http-async', configuration: { callbackUrl: `http://127.0.0.1:${port}/cb`, retry: 2 } },
        ],
      };
      assert.equal(
        (await s.api('/agents/py-agent', { method: 'PUT', json: { metadata: { name: 'py-agent' }, spec } }))
          .status,
        200,
      );
      await s.waitFor('py-agent', () => true);
      let o: any;
      for (let i = 0; i < 200; i++) {
        o = await (await s.api('/agents/py-agent?show_secrets=true')).json();
        if (o.status === 'DEPLOYED') break;
        await sleep(50);
      }
      const secret = o.spec.triggers[0].configuration.callbackSecret;
      assert.match(secret, /^whsec_/);
      const res = await s.run(`${s.url}/run/default/agents/py-agent?async=true`, {
        method: 'POST',
        json: { inputs: 'later' },
      });
      assert.equal(res.status, 202);
      const accepted = await res.json();
      assert.match(accepted.id, /^exec_/);
      for (let i = 0; i < 200 && received.length < 2; i++) await sleep(50);
      assert.equal(received.length, 2, 'the 500 was retried');
      assert.equal(received[0].headers['webhook-id'], received[1].headers['webhook-id']);
      const last = received[1];
      const payload = new Webhook(secret).verify(last.body, last.headers as Record<string, string>) as any;
      assert.equal(payload.data.executionId, accepted.id);
      assert.equal(payload.data.status, 'completed');
      assert.equal(JSON.parse(payload.data.output).output, 'LATER');
      assert.equal(
        verifyWebhookSignature({
          body: last.body,
          secret,
          signature: last.headers['x-blaxel-signature'],
          timestamp: last.headers['x-blaxel-timestamp'],
        }),
        true,
      );
      const status = await (await s.api(`/agents/py-agent/executions/${accepted.id}`)).json();
      assert.equal(status.status, 'completed');
      assert.equal(status.callback.delivered, true);
    } finally {
      receiver.close();
    }
  });

  it('a public agent answers without a credential', async () => {
    const dir = join(work, 'pub-agent');
    cpSync(join(TEMPLATES, 'agent-python'), dir, { recursive: true });
    writeFileSync(join(dir, 'berth.toml'), 'type = "agent"\npublic = true\n[runtime]\nmemory = 256\n');
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const res = await fetch(`${s.url}/run/default/agents/pub-agent`, {
      method: 'POST',
      body: '{"inputs":"x"}',
    });
    assert.equal(res.status, 200);
    assert.equal((await res.json()).output, 'X');
  });

  it('a build that needs the network fails with its own error, and deploy prints it and exits 1', async () => {
    const dir = join(work, 'needs-net');
    cpSync(join(TEMPLATES, 'agent-python'), dir, { recursive: true });
    writeFileSync(join(dir, 'requirements.txt'), 'definitely-not-a-cached-package==1.0\n');
    writeFileSync(join(dir, 'berth.toml'), '[runtime]\nmemory = 256\n');
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /\] building$/m, 'the build phase');
    assert.match(
      r.stderr,
      /^agent\/needs-net FAILED: .*build failed/m,
      'the reason, from the object’s last event',
    );
    assert.equal(r.stdout, '', 'no address: nothing serves');
    assert.match(r.stderr, /definitely-not-a-cached-package/, 'the last lines of the build log are shown');
    const o = await (await s.api('/agents/needs-net')).json();
    assert.equal(o.status, 'FAILED');
  });

  it("requirements.txt is installed once into the workspace's cache: another source with the same file copies the venv", async () => {
    // `pip` is in every venv already: installing it needs no index, so this works with no network.
    const deploy = async (name: string, main: string) => {
      const dir = join(work, name);
      cpSync(join(TEMPLATES, 'agent-python'), dir, { recursive: true });
      writeFileSync(join(dir, 'requirements.txt'), 'pip\n');
      writeFileSync(join(dir, 'main.py'), `${main}\n${readFileSync(join(dir, 'main.py'), 'utf8')}`);
      writeFileSync(join(dir, 'berth.toml'), `type = "agent"\nname = "${name}"\n[runtime]\nmemory = 256\n`);
      const r = await berth(s, ['deploy', dir]);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      return (await s.api(`/agents/${name}/revisions/latest/logs`)).text();
    };
    const first = await deploy('venv-one', '# one');
    assert.match(first, /dependency cache miss \(requirements\.txt /);
    assert.match(first, /Requirement already satisfied: pip/, "pip's own output, from the install step");
    const second = await deploy('venv-two', '# two');
    assert.match(second, /dependency cache hit \(requirements\.txt /);
    assert.match(second, /\.venv from the workspace's dependency cache/);
    const res = await s.run(`${s.url}/run/default/agents/venv-two`, {
      method: 'POST',
      json: { inputs: 'x' },
    });
    assert.equal(res.status, 200);
    assert.equal((await res.json()).output, 'X');
  });

  it('a start command that exits before listening is FAILED with its output, never DEPLOYED', async () => {
    const dir = join(work, 'crash');
    mkdtempSync(join(work, 'x'));
    cpSync(join(TEMPLATES, 'agent-python'), dir, { recursive: true });
    writeFileSync(join(dir, 'main.py'), 'import sys\nprint("boom at start", flush=True)\nsys.exit(3)\n');
    writeFileSync(join(dir, 'berth.toml'), '[runtime]\nmemory = 256\n');
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /boom at start/);
    assert.match(r.stderr, /exited with code 3/);
  });

  it('an archive with a path out of it is refused at upload (400) and nothing is built', async () => {
    await s.api('/agents/slip', { method: 'PUT', json: { metadata: { name: 'slip' }, spec: {} } });
    const zip = await import('yazl');
    const z = new zip.default.ZipFile();
    z.addBuffer(Buffer.from('x'), 'ok.txt');
    // yazl refuses to write such names itself; patch the name after adding, as a hostile client would.
    (z as any).entries[0].utf8FileName = Buffer.from('../../etc/evil');
    z.end();
    const chunks: Buffer[] = [];
    for await (const c of z.outputStream) chunks.push(c as Buffer);
    const res = await s.api('/agents/slip/code', {
      method: 'PUT',
      headers: { 'content-type': 'application/zip' },
      body: Buffer.concat(chunks),
    } as any);
    assert.equal(res.status, 400, await res.text());
    const o = await (await s.api('/agents/slip')).json();
    assert.equal(o.source, undefined);
  });
});
