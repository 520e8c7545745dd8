// Agents, functions and jobs on `spec.runtime.image`, end to end on real sandboxes: images the test makes itself
// (a static BusyBox, and in one of them this host's node binary with its libraries under /opt/node), pushed to a
// loopback registry and pulled into the workspace through /v0/images. The build sandbox runs on the image (its
// node builds the app), replicas and job tasks run on it with the app at /app; an image the workspace lacks, or
// one without node, ends FAILED saying so; a restarted server re-adopts the replica on the image. Another tenant
// importing its own content under the image's name changes nothing of an agent's (decision 037).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  nodeLayer,
  Pusher,
  savedArchive,
  startRegistry,
  type TestRegistry,
  toolsLayer,
} from '../../src/runtime/images/test-support/registry.js';
import { newTenant } from '../../src/test-support/tenants.js';
import { OUTBOUND_LOOPBACK } from '../../src/test-support/server.js';
import { berth } from '../berth-cli.js';
import { api, waitExecution } from '../jobs/support.js';
import {
  inspectingDriver,
  removeAllSandboxes,
  type SandboxServer,
  startSandboxServer,
} from '../sandboxes/support.js';
import { removeDirLater } from '../../src/test-support/sandboxes.js';

async function replicas(dataDir: string) {
  const d = await inspectingDriver(dataDir);
  try {
    return (await d.list()).filter((i) => i.id.startsWith('wl-'));
  } finally {
    await d.close();
  }
}

/** A Node agent with no dependencies that says where it runs. */
function writeApp(dir: string, manifest: string) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'where', main: 'index.js' }));
  writeFileSync(
    join(dir, 'index.js'),
    `const http = require('node:http');
const fs = require('node:fs');
http.createServer((req, res) => {
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({
    node: process.execPath,
    os: fs.readFileSync('/etc/os-release', 'utf8').trim(),
    port: process.env.PORT,
    path: process.env.PATH,
    cwd: process.cwd(),
  }));
}).listen(Number(process.env.PORT), process.env.HOST);
`,
  );
  writeFileSync(join(dir, 'berth.toml'), manifest);
}

describe('agents and jobs on spec.runtime.image', () => {
  let s: SandboxServer;
  let reg: TestRegistry;
  let work: string;
  let dataDir: string;
  let nodeRef: string;
  let nodeId: string;
  let bareRef: string;
  before(async () => {
    // A data dir of the test's own: a server closed mid-test leaves its replicas there for the next one.
    dataDir = mkdtempSync(join(tmpdir(), 'berth-agentimg-data-'));
    // The registry listens on loopback.
    [s, reg] = await Promise.all([startSandboxServer({ ...OUTBOUND_LOOPBACK }, dataDir), startRegistry()]);
    work = mkdtempSync(join(tmpdir(), 'berth-agentimg-'));
    const push = new Pusher(reg);
    const node = await push.image(
      'test/node',
      'v1',
      [await toolsLayer('berth-node-test'), await nodeLayer()],
      {
        Env: ['PATH=/opt/node/bin:/bin'],
      },
    );
    const bare = await push.image('test/bare', 'v1', [await toolsLayer('berth-bare-test')], {
      Env: ['PATH=/bin'],
    });
    nodeRef = node.reference;
    nodeId = node.configDigest;
    bareRef = bare.reference;
    for (const reference of [nodeRef, bareRef]) {
      const r = await s.api('/images', { method: 'POST', json: { reference } });
      assert.equal(r.status, 200, await r.text());
    }
  });
  after(async () => {
    await s.close();
    await reg.stop();
    await removeAllSandboxes(dataDir);
    removeDirLater(dataDir);
    rmSync(work, { recursive: true, force: true });
  });

  it('an agent on a stored image is built by its node and its replica runs on it, answering through the gateway', async () => {
    const dir = join(work, 'img-agent');
    writeApp(dir, `type = "agent"\nname = "img-agent"\n[runtime]\nmemory = 256\nimage = "${nodeRef}"\n`);
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, 0, r.out);
    assert.match(r.stderr, /DEPLOYED in/);
    const res = await s.run(`${s.url}/run/default/agents/img-agent`);
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.equal(body.node, '/opt/node/bin/node', "the image's node runs the app");
    assert.equal(body.os, 'ID=berth-node-test', "the image's own files");
    assert.equal(body.port, '8080');
    assert.equal(body.cwd, '/app');
    assert.equal(body.path, '/app/node_modules/.bin:/app/.venv/bin:/opt/node/bin:/bin', "the image's PATH");
    const o = await (await s.api('/agents/img-agent')).json();
    const log = await (await s.api(`/agents/img-agent/revisions/${o.activeRevision}/logs`)).text();
    assert.match(log, new RegExp(`building on image ${nodeRef} \\(${nodeId}\\)`));
    assert.match(log, /node: \/opt\/node\/bin\/node v\d+/, "the build sandbox ran the image's node");
    const before = await replicas(dataDir);
    assert.deepEqual(
      before.map((i) => i.image),
      [nodeId],
      'the replica runs on the image, by id',
    );

    // A new server on the same data dir takes the replica over (same sandbox, same process): its spec matches.
    await s.close();
    s = await startSandboxServer({ ...OUTBOUND_LOOPBACK }, dataDir);
    let again: Response | undefined;
    for (let i = 0; i < 600 && again?.status !== 200; i++) {
      if (again) {
        await again.body?.cancel();
        await new Promise((r) => setTimeout(r, 100));
      }
      again = await s.run(`${s.url}/run/default/agents/img-agent`);
    }
    assert.ok(again);
    assert.equal(again.status, 200);
    assert.equal((await again.json()).node, '/opt/node/bin/node');
    assert.deepEqual(
      (await replicas(dataDir)).map((i) => [i.id, i.pid]),
      before.map((i) => [i.id, i.pid]),
      're-adopted, not replaced',
    );
    const rm = await s.api(`/images/${nodeRef}`, { method: 'DELETE' });
    assert.equal(rm.status, 409, 'an image replicas run on stays');
  });

  it('an image the workspace does not hold: FAILED with an event naming it and how to import it', async () => {
    const dir = join(work, 'absent');
    writeApp(dir, 'type = "agent"\nname = "absent"\n[runtime]\nmemory = 256\nimage = "local/absent:1"\n');
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, 1, r.out);
    const o = await (await s.api('/agents/absent')).json();
    assert.equal(o.status, 'FAILED');
    const msg: string = o.events.at(-1).message;
    assert.match(msg, /image local\/absent:1 is not in this workspace's images/);
    assert.match(msg, /berth image import <archive\.tar> --name local\/absent:1/);
  });

  it("an image without node fails the build with the shell's own error, in the event and the log", async () => {
    const dir = join(work, 'no-node');
    writeApp(dir, `type = "function"\nname = "no-node"\n[runtime]\nmemory = 256\nimage = "${bareRef}"\n`);
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, 1, r.out);
    const o = await (await s.api('/functions/no-node')).json();
    assert.equal(o.status, 'FAILED');
    assert.match(o.events.at(-1).message, /build failed: the build exited with code 127/);
    assert.match(o.events.at(-1).message, /node: not found/);
  });

  it('a job on a stored image runs its tasks on it', async () => {
    const dir = join(work, 'img-job');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'img-job', main: 'index.js' }));
    writeFileSync(
      join(dir, 'index.js'),
      "console.log('task on', process.execPath, require('node:fs').readFileSync('/etc/os-release', 'utf8').trim());\n",
    );
    writeFileSync(
      join(dir, 'berth.toml'),
      `type = "job"\nname = "img-job"\n[runtime]\nmemory = 256\nimage = "${nodeRef}"\n`,
    );
    const d = await berth(s, ['deploy', dir]);
    assert.equal(d.code, 0, d.out);
    const started = await api(s, '/jobs/img-job/executions', { method: 'POST', json: { tasks: [{}] } });
    assert.equal(started.status, 200, JSON.stringify(started.body));
    const id = started.body.executionId;
    const done = await waitExecution(s, 'img-job', id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    const log = await api(s, `/jobs/img-job/executions/${id}/tasks/0/logs`);
    assert.match(String(log.body), /task on \/opt\/node\/bin\/node ID=berth-node-test/);
  });

  it("another tenant's import under the agent's image name neither rebuilds it nor changes what it serves", async () => {
    const a = await newTenant(s, 'agent-a');
    const b = await newTenant(s, 'agent-b');
    const asA = { url: s.url, adminKey: a.key };
    const pulled = await s.api('/images', { method: 'POST', json: { reference: nodeRef }, key: a.key });
    assert.equal(pulled.status, 200, await pulled.text());
    const dir = join(work, 'tenant-agent');
    writeApp(dir, `type = "agent"\nname = "held"\n[runtime]\nmemory = 256\nimage = "${nodeRef}"\n`);
    const first = await berth(asA, ['deploy', dir]);
    assert.equal(first.code, 0, first.out);
    const ask = async () => {
      const res = await fetch(`${s.url}/run/${a.home}/agents/held`, {
        headers: { 'x-blaxel-authorization': `Bearer ${a.key}` },
      });
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      return body;
    };
    assert.equal((await ask()).os, 'ID=berth-node-test');
    const revision = (await (await s.api('/agents/held', { key: a.key })).json()).activeRevision;

    // B: a working node image of its own, imported under the registry name A's agent names.
    const theirs = await savedArchive([await toolsLayer('berth-tenant-b'), await nodeLayer()], [], {
      Env: ['PATH=/opt/node/bin:/bin'],
    });
    const imported = await s.api(`/images/import?name=${encodeURIComponent(nodeRef)}`, {
      method: 'POST',
      body: new Uint8Array(theirs.archive),
      headers: { 'content-type': 'application/x-tar' },
      key: b.key,
    });
    assert.equal(imported.status, 200, await imported.text());

    // A's agent is looked at again (what its periodic check does): same image, same revision, A's content.
    const again = await berth(asA, ['deploy', dir]);
    assert.equal(again.code, 0, again.out);
    const o = await (await s.api('/agents/held', { key: a.key })).json();
    assert.equal(o.activeRevision, revision, 'not rebuilt');
    assert.equal(o.revisions.length, 1, JSON.stringify(o.revisions));
    assert.equal((await ask()).os, 'ID=berth-node-test', "A's image still serves A's agent");
  });
});
