// An agent and a job whose code has a Dockerfile at its root (decision 051), end to end on real sandboxes: the
// Dockerfile builds on an image of a loopback registry (BusyBox and this host's node), the replica runs the image as it
// is (its WorkingDir, its own files, no /app over it) with its CMD as the start command, answering through the
// gateway; a redeploy of the same code takes every step from the cache; a failing RUN makes the agent FAILED naming it.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  nodeLayer,
  Pusher,
  startRegistry,
  type TestRegistry,
  toolsLayer,
} from '../../src/runtime/images/test-support/registry.js';
import { OUTBOUND_LOOPBACK } from '../../src/test-support/server.js';
import { berth } from '../berth-cli.js';
import { removeAllSandboxes, type SandboxServer, startSandboxServer } from '../sandboxes/support.js';
import { removeDirLater } from '../../src/test-support/sandboxes.js';

const SERVER = `const http = require('node:http');
const fs = require('node:fs');
http.createServer((req, res) => {
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({
    cwd: process.cwd(),
    baked: fs.readFileSync('baked.txt', 'utf8').trim(),
    greeting: process.env.GREETING,
    port: process.env.PORT,
  }));
}).listen(Number(process.env.PORT), process.env.HOST);
`;

describe('agents built from a Dockerfile', () => {
  let s: SandboxServer;
  let reg: TestRegistry;
  let work: string;
  let dataDir: string;
  let base: string;
  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'berth-dfagent-data-'));
    [s, reg] = await Promise.all([startSandboxServer({ ...OUTBOUND_LOOPBACK }, dataDir), startRegistry()]);
    work = mkdtempSync(join(tmpdir(), 'berth-dfagent-'));
    base = (
      await new Pusher(reg).image('test/node', 'v1', [await toolsLayer('df-node'), await nodeLayer()], {
        Env: ['PATH=/opt/node/bin:/bin'],
      })
    ).reference;
  });
  after(async () => {
    await s.close();
    await reg.stop();
    await removeAllSandboxes(dataDir);
    removeDirLater(dataDir);
    rmSync(work, { recursive: true, force: true });
  });

  function app(name: string, dockerfile: string) {
    const dir = join(work, name);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'berth.toml'), `type = "agent"\nname = "${name}"\n[runtime]\nmemory = 256\n`);
    writeFileSync(join(dir, 'server.js'), SERVER);
    writeFileSync(join(dir, 'Dockerfile'), dockerfile);
    return dir;
  }

  it('builds, runs the image with its CMD and WorkingDir, and answers through the gateway; a redeploy is cached', async () => {
    const dir = app(
      'df-agent',
      `FROM ${base}\nWORKDIR /srv/app\nCOPY server.js .\nRUN echo "baked at build" > baked.txt\nENV GREETING=from-the-dockerfile\nCMD ["node", "server.js"]\n`,
    );
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, 0, r.out);
    const res = await s.run(`${s.url}/run/default/agents/df-agent`);
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.deepEqual(body, {
      cwd: '/srv/app',
      baked: 'baked at build',
      greeting: 'from-the-dockerfile',
      port: '8080',
    });
    const o = await (await s.api('/agents/df-agent')).json();
    const log = await (await s.api(`/agents/df-agent/revisions/${o.activeRevision}/logs`)).text();
    assert.match(log, /building the Dockerfile at the root of the upload/);
    assert.match(log, /Step 4\/6 : RUN echo "baked at build" > baked.txt/);
    assert.match(log, /start command: node server\.js/);
    // New code that changes nothing the Dockerfile reads: a new build, every step from the workspace's layer cache.
    writeFileSync(join(dir, 'README.md'), 'notes\n');
    writeFileSync(join(dir, '.dockerignore'), 'README.md\n');
    const again = await berth(s, ['deploy', dir]);
    assert.equal(again.code, 0, again.out);
    const o2 = await (await s.api('/agents/df-agent')).json();
    assert.notEqual(o2.activeRevision, o.activeRevision, 'another upload, another revision');
    const log2 = await (await s.api(`/agents/df-agent/revisions/${o2.activeRevision}/logs`)).text();
    assert.equal(log2.match(/Using cache/g)?.length, 3, log2);
    // The image is the workspace's own, listed with its other images.
    const images = await (await s.api('/images')).json();
    assert.ok(
      images.some((i: any) => i.references.some((n: string) => n.startsWith('docker.io/berth-builds/app:'))),
    );
  });

  it('a failing RUN makes the agent FAILED with the instruction and its output', async () => {
    const dir = app(
      'df-broken',
      `FROM ${base}\nRUN echo cannot do this && exit 7\nCMD ["node", "server.js"]\n`,
    );
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, 1, r.out);
    const o = await (await s.api('/agents/df-broken')).json();
    assert.equal(o.status, 'FAILED');
    assert.match(
      o.events.at(-1).message,
      /RUN echo cannot do this && exit 7: the command exited with code 7/,
    );
  });
});
