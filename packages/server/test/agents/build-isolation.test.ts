// Build poisoning (review finding N1). A tenant's build runs its own code (npm scripts): that code writes a fake `tsc`
// into every dependency cache entry it can see and tries to plant new ones. Across tenants: another tenant deploying
// the very same template source must get a build of its own, running none of that code. Within one workspace: a later
// build of the same lockfile must still get what the package manager installed. The fake tsc leaves an app that
// answers "POISONED"; the real template answers the inputs in capitals.
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, describe, it } from 'node:test';
import yazl from 'yazl';
import { seedNodeCache } from '../../src/test-support/dependency-cache.js';
import { newTenant, type Tenant } from '../../src/test-support/tenants.js';
import { type SandboxServer, startSandboxServer } from '../sandboxes/support.js';

const REPO = join(import.meta.dirname, '../../../..');
const TEMPLATE = join(REPO, 'templates', 'agent-typescript');
const POLL_MS = 100;
/** A TypeScript build and a replica start, on a loaded 2-core machine. */
const DEPLOY_POLLS = 3000;

/** What the tenant's build scripts run: overwrite every cached tsc in reach, and plant a new entry. */
const POISON_SH = `for f in $(find /cache -path '*/typescript/bin/tsc' 2>/dev/null); do
  echo "poison: attempted $f"
  if cp fake-tsc.txt "$f" 2>/dev/null; then echo "poison: wrote $f"; fi
done
if mkdir -p /cache/node/planted/node_modules 2>/dev/null; then echo "poison: planted"; fi
exit 0
`;
/** The fake tsc: instead of compiling, it writes an app of the attacker's. */
const FAKE_TSC = `#!/usr/bin/env node
const fs = require('node:fs');
fs.mkdirSync('dist', { recursive: true });
fs.writeFileSync('dist/index.js', "import http from 'node:http';\\n" +
  "http.createServer((q, r) => { r.writeHead(200, { 'content-type': 'application/json' }); " +
  "r.end(JSON.stringify({ output: 'POISONED' })); }).listen(Number(process.env.PORT), process.env.HOST);\\n");
`;

function filesOf(dir: string): Record<string, Buffer> {
  const out: Record<string, Buffer> = {};
  const walk = (d: string) => {
    for (const e of readdirSync(d)) {
      const p = join(d, e);
      if (e === 'node_modules' || e === 'dist') continue;
      if (statSync(p).isDirectory()) walk(p);
      else out[relative(dir, p)] = readFileSync(p);
    }
  };
  walk(dir);
  return out;
}

async function zipOf(files: Record<string, Buffer>): Promise<Buffer> {
  const z = new yazl.ZipFile();
  for (const [name, data] of Object.entries(files)) z.addBuffer(data, name, { mtime: new Date(0) });
  z.end();
  const chunks: Buffer[] = [];
  for await (const c of z.outputStream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

const template = filesOf(TEMPLATE);
/** The template with build scripts of the attacker's: same dependencies, same lockfile (`tag`: its own source). */
function poisoner(tag: string): Record<string, Buffer> {
  const pkg = JSON.parse(template['package.json'].toString('utf8'));
  pkg.scripts = { ...pkg.scripts, postinstall: 'sh poison.sh', build: 'sh poison.sh && tsc' };
  return {
    ...template,
    'package.json': Buffer.from(JSON.stringify(pkg, null, 2)),
    'poison.sh': Buffer.from(POISON_SH),
    'fake-tsc.txt': Buffer.from(FAKE_TSC),
    'tag.txt': Buffer.from(tag),
  };
}

describe('a build cannot poison another build', () => {
  let s: SandboxServer;
  let work: string;
  let a: Tenant;
  let b: Tenant;
  before(async () => {
    s = await startSandboxServer();
    work = mkdtempSync(join(tmpdir(), 'berth-build-isolation-'));
    a = await newTenant(s, 'tenant-a');
    b = await newTenant(s, 'tenant-b');
    // Each workspace's cache holds the template's lockfile, as a first build with network would have left it.
    const dir = join(work, 'template');
    cpSync(TEMPLATE, dir, { recursive: true });
    // Copies, not links to the repository's node_modules: the poisoner's build writes at the cache, and a regression
    // of the read-only mount must damage this test's entries alone.
    for (const ws of ['default', a.home, b.home]) seedNodeCache(s.dataDir, ws, dir, REPO, { copy: true });
  });
  after(async () => {
    await s.close();
    rmSync(work, { recursive: true, force: true });
  });

  /** Creates the agent and uploads the zip with the tenant's own key (in `workspace`); waits for DEPLOYED. */
  async function deploy(key: string, name: string, zip: Buffer, workspace?: string) {
    const headers = {
      authorization: `Bearer ${key}`,
      ...(workspace ? { 'x-blaxel-workspace': workspace } : {}),
    };
    const put = await fetch(`${s.url}/v0/agents/${name}`, {
      method: 'PUT',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ metadata: { name }, spec: { runtime: { memory: 256 } } }),
    });
    assert.ok(put.ok, `${put.status} ${await put.text()}`);
    const up = await fetch(`${s.url}/v0/agents/${name}/code`, {
      method: 'PUT',
      headers: { ...headers, 'content-type': 'application/zip' },
      body: new Uint8Array(zip),
    });
    assert.ok(up.ok, `${up.status} ${await up.text()}`);
    for (let i = 0; i < DEPLOY_POLLS; i++) {
      const o = await (await fetch(`${s.url}/v0/agents/${name}`, { headers })).json();
      if (o.status === 'DEPLOYED') return o;
      if (o.status === 'FAILED') assert.fail(`${name}: ${JSON.stringify(o.events.at(-1))}`);
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
    assert.fail(`${name} was never DEPLOYED`);
  }

  const buildLog = async (key: string, name: string, workspace?: string) =>
    (
      await fetch(`${s.url}/v0/agents/${name}/revisions/latest/logs`, {
        headers: {
          authorization: `Bearer ${key}`,
          ...(workspace ? { 'x-blaxel-workspace': workspace } : {}),
        },
      })
    ).text();

  async function answer(key: string, ws: string, name: string): Promise<string> {
    const r = await fetch(`${s.url}/run/${ws}/agents/${name}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: 'hello' }),
    });
    const text = await r.text();
    assert.equal(r.status, 200, text);
    return JSON.parse(text).output;
  }

  it("another tenant deploying the same template source gets its own build, running none of the first tenant's code", async () => {
    await deploy(a.key, 'poisoner', await zipOf(poisoner('tenant a')));
    const poisonLog = await buildLog(a.key, 'poisoner');
    assert.match(
      poisonLog,
      /poison: attempted \/cache\//,
      "the attacker's build code ran and found the cache",
    );
    const same = await zipOf(template);
    const ofA = await deploy(a.key, 'agent-typescript', same);
    const ofB = await deploy(b.key, 'agent-typescript', same);
    assert.equal(ofB.source.digest, ofA.source.digest, 'the very same source');
    assert.equal(await answer(b.key, b.home, 'agent-typescript'), 'HELLO', "B's replica serves the template");
    assert.notEqual(ofB.activeRevision, ofA.activeRevision, "B's revision is its own build, not A's");
    assert.doesNotMatch(await buildLog(b.key, 'agent-typescript'), /poison/);
    assert.equal(
      await answer(a.key, a.home, 'agent-typescript'),
      'HELLO',
      "A's own cache was not changed either",
    );
  });

  it('within a workspace, a build whose code writes into the cache does not change what a later build of the same lockfile gets', async () => {
    await deploy(s.adminKey, 'poisoner', await zipOf(poisoner('default')));
    const poisonLog = await buildLog(s.adminKey, 'poisoner');
    assert.match(poisonLog, /poison: attempted \/cache\//);
    // Another source (a comment), same package.json dependencies and lockfile: the cache entry is used.
    const src = template['src/index.ts'].toString('utf8');
    await deploy(
      s.adminKey,
      'later',
      await zipOf({ ...template, 'src/index.ts': Buffer.from(`// later\n${src}`) }),
    );
    assert.match(await buildLog(s.adminKey, 'later'), /dependency cache hit/);
    assert.equal(await answer(s.adminKey, 'default', 'later'), 'HELLO');
    assert.doesNotMatch(poisonLog, /poison: (wrote|planted)/, 'the cache is read-only to the build');
  });

  it('a deleted workspace takes its builds, logs, sources and cache with it; a new one of the same name builds anew', async () => {
    const ws = 'short-lived';
    const dir = join(s.dataDir, 'builds', 'workspaces', ws);
    const create = await s.api('/workspaces', { method: 'POST', json: { name: ws } });
    assert.ok(create.ok, await create.text());
    seedNodeCache(s.dataDir, ws, join(work, 'template'), REPO);
    const zip = await zipOf(filesOf(join(REPO, 'templates', 'agent-python')));
    const first = await deploy(s.adminKey, 'py', zip, ws);
    assert.match(await buildLog(s.adminKey, 'py', ws), /build done/);
    for (const d of ['apps', 'logs', 'code', 'deps']) assert.ok(existsSync(join(dir, d)), d);
    const headers = { 'x-blaxel-workspace': ws };
    assert.ok((await s.api('/agents/py', { method: 'DELETE', headers })).ok);
    for (let i = 0; i < DEPLOY_POLLS && (await s.api('/agents/py', { headers })).status !== 404; i++)
      await new Promise((r) => setTimeout(r, POLL_MS));
    const del = await s.api(`/workspaces/${ws}`, { method: 'DELETE' });
    assert.ok(del.ok, await del.text());
    assert.equal(existsSync(dir), false, "nothing of the workspace's builds is left");

    assert.ok((await s.api('/workspaces', { method: 'POST', json: { name: ws } })).ok);
    const again = await deploy(s.adminKey, 'py', zip, ws);
    assert.equal(again.source.digest, first.source.digest, 'the same source');
    assert.ok(
      again.events.some((e: { status: string }) => e.status === 'BUILT'),
      'built again (a BUILT event), not found built',
    );
    assert.deepEqual(readdirSync(join(dir, 'apps')).length, 2, 'one app (and its plan file), the new one');
    assert.equal(existsSync(join(dir, 'deps')), false, 'no cache entry came back');
  });
});
