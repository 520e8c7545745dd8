// The builder's steps on the fake runtime, with a stand-in sandbox daemon that records what each step was given and
// plays the package manager: the install step sees only the install inputs and writes only its own output, the
// server seals that output into the workspace's cache once the install sandbox is gone, the build step gets the one
// entry read-only, and apps, logs and caches are looked up in their own workspace only.
import assert from 'node:assert/strict';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { Readable } from 'node:stream';
import { after, describe, it } from 'node:test';
import yazl from 'yazl';
import { FakeDriver } from '../runtime/fake.js';
import { Instances } from '../runtime/instances.js';
import type { SandboxSpec, VolumeMount } from '../runtime/driver.js';
import { Builder, BuildError } from './builder.js';
import { Outbound } from '../outbound/index.js';
import { CodeStore } from './code-store.js';
import { workspaceBuildsDir } from './layout.js';

const root = mkdtempSync(join(tmpdir(), 'berth-builder-'));
const dataDir = join(root, 'data');
const socketDir = join(root, 'sock');
mkdirSync(socketDir);

interface Step {
  id: string;
  spec: SandboxSpec;
  command?: string;
  /** What /src held, and its package.json, for an install step. */
  saw?: string[];
  pkg?: any;
  /** For an install step: the cache entries there were when its sandbox was removed. */
  entriesAtRemoval?: string[];
}

class RecordingDriver extends FakeDriver {
  readonly steps: Step[] = [];
  /** Set by a test: lists the cache entries, noted when an install sandbox is removed. */
  entries?: () => string[];
  override async ensure(id: string, spec: SandboxSpec) {
    this.steps.push({ id, spec });
    const info = await super.ensure(id, spec);
    await serveDaemon(info.socketPath);
    return info;
  }
  override async remove(id: string) {
    const s = [...this.steps].reverse().find((x) => x.id === id);
    if (s && id.startsWith('bld-i')) s.entriesAtRemoval = this.entries?.();
    return super.remove(id);
  }
}

const driver = new RecordingDriver(undefined, { socketDir });
/** The object the builds are for (the owner of their steps' instances). */
const OWNER = { kind: 'Agent', name: 'app' };
const mount = (spec: SandboxSpec, path: string) => spec.volumes.find((v) => v.mountPath === path);
/** Held open by the stand-in daemon until the test lets it go (a build under way). */
let hold: Promise<void> | undefined;

/** The stand-in daemon of a sandbox: plays the step its script is (install or build) on the mounted directories. */
function daemon(id: string): Server {
  return createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', async () => {
      if (req.url === '/health') return res.end(JSON.stringify({ status: 'ok' }));
      const step = [...driver.steps].reverse().find((s) => s.id === id) as Step;
      step.command = JSON.parse(body).command;
      const src = mount(step.spec, '/src')?.hostPath as string;
      const app = mount(step.spec, '/app')?.hostPath as string;
      const cache = mount(step.spec, '/cache')?.hostPath;
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      if (hold) await hold;
      if (id.startsWith('bld-i')) {
        step.saw = readdirSync(src).sort();
        step.pkg = JSON.parse(readFileSync(join(src, 'package.json'), 'utf8'));
        // npm ci: the packages the lockfile names, under /app.
        mkdirSync(join(app, 'node_modules', 'dep'), { recursive: true });
        writeFileSync(
          join(app, 'node_modules', 'dep', 'index.js'),
          readFileSync(join(src, 'package-lock.json')),
        );
      } else {
        cpSync(src, app, { recursive: true });
        if (cache) cpSync(join(cache, 'node_modules'), join(app, 'node_modules'), { recursive: true });
      }
      res.write(`${JSON.stringify({ type: 'stdout', data: `played ${id}\n` })}\n`);
      res.end(
        `${JSON.stringify({ type: 'result', data: JSON.stringify({ exitCode: 0, status: 'completed' }) })}\n`,
      );
    });
  });
}

const servers = new Map<string, Server>();
/** The stand-in daemon of a step's sandbox answers on its socket from the start (as the runtime's own does). */
async function serveDaemon(socketPath: string) {
  if (servers.has(socketPath)) return;
  rmSync(socketPath, { force: true });
  const s = daemon(basename(socketPath, '.sock'));
  servers.set(socketPath, s);
  await new Promise<void>((r) => s.listen(socketPath, r));
}

const code = new CodeStore(dataDir);
// No git source here: an outbound client that opens nothing.
const builder = new Builder({
  dataDir,
  instances: new Instances({ driver }),
  code,
  outbound: new Outbound({ allowCidrs: [] }),
});

after(async () => {
  for (const s of servers.values()) s.close();
  rmSync(root, { recursive: true, force: true });
});

async function upload(workspace: string, files: Record<string, string>): Promise<string> {
  const z = new yazl.ZipFile();
  for (const [name, text] of Object.entries(files))
    z.addBuffer(Buffer.from(text), name, { mtime: new Date(0) });
  z.end();
  const chunks: Buffer[] = [];
  for await (const c of z.outputStream) chunks.push(c as Buffer);
  return (await code.put(workspace, Readable.from(Buffer.concat(chunks)))).digest;
}

const LOCK = JSON.stringify({
  lockfileVersion: 3,
  packages: { '': {}, 'node_modules/dep': { version: '1.0.0' } },
});
const project = (index: string) => ({
  'package.json': JSON.stringify({
    name: 'p',
    scripts: { start: 'node index.js', postinstall: 'node steal.js' },
    dependencies: { dep: '1.0.0' },
  }),
  'package-lock.json': LOCK,
  'index.js': index,
  'steal.js': 'the project itself',
});
const signal = new AbortController().signal;
const stepsSince = (n: number) => driver.steps.slice(n);
const writable = (spec: SandboxSpec) =>
  spec.volumes.filter((v: VolumeMount) => !v.readOnly).map((v) => v.mountPath);

describe('builder', () => {
  let firstKey = '';
  let firstDigest = '';

  it('installs from the manifest and lockfile alone, seals the output once the sandbox is gone, and mounts it read-only in the build', async () => {
    firstDigest = await upload('alpha', project('one'));
    const depsRoot = join(workspaceBuildsDir(dataDir, 'alpha'), 'deps', 'default', 'node');
    driver.entries = () => (existsSync(depsRoot) ? readdirSync(depsRoot) : []);
    const n = driver.steps.length;
    const app = await builder.build('alpha', firstDigest, signal, undefined, OWNER);
    driver.entries = undefined;
    firstKey = app.key;
    const [install, build] = stepsSince(n);
    assert.ok(
      install.id.startsWith('bld-i') && build.id.startsWith('bld-'),
      'an install step, then a build step',
    );
    assert.deepEqual(
      install.saw,
      ['package-lock.json', 'package.json'],
      'nothing of the project but its manifest',
    );
    assert.equal(
      install.pkg.scripts,
      undefined,
      "the project's scripts are not in the install step's package.json",
    );
    assert.deepEqual(install.pkg.dependencies, { dep: '1.0.0' });
    assert.deepEqual(writable(install.spec), ['/app']);
    assert.match(install.command ?? '', /npm ci/);
    assert.deepEqual(install.entriesAtRemoval, [], 'nothing sealed while the install sandbox existed');
    const [entry] = readdirSync(depsRoot);
    const entryDir = join(depsRoot, entry);
    assert.equal(
      readFileSync(join(entryDir, 'node_modules', 'dep', 'index.js'), 'utf8'),
      LOCK,
      'sealed by the server',
    );
    assert.deepEqual(writable(build.spec), ['/app'], 'the build step writes its app only');
    assert.deepEqual(mount(build.spec, '/cache'), {
      hostPath: entryDir,
      mountPath: '/cache',
      readOnly: true,
    });
    assert.match(
      build.command ?? '',
      /npm run postinstall/,
      "the project's own install script runs in the build",
    );
    assert.ok(existsSync(join(app.dir, 'node_modules', 'dep', 'index.js')));
    assert.match(builder.readLog('alpha', app.key) ?? '', /dependency cache miss/);
  });

  it('another source with the same lockfile copies the entry: no install runs', async () => {
    const n = driver.steps.length;
    const app = await builder.build(
      'alpha',
      await upload('alpha', project('four')),
      signal,
      undefined,
      OWNER,
    );
    assert.deepEqual(
      stepsSince(n).map((s) => s.id.startsWith('bld-i')),
      [false],
      'one build step, no install step',
    );
    assert.match(builder.readLog('alpha', app.key) ?? '', /dependency cache hit/);
  });

  it("a workspace finds none of another's apps, logs or cache entries, even by key", async () => {
    assert.ok(builder.builtByKey('alpha', firstKey));
    assert.equal(builder.builtByKey('beta', firstKey), undefined);
    assert.equal(builder.hasLog('beta', firstKey), false);
    assert.equal(builder.readLog('beta', firstKey), undefined);
    assert.equal(builder.built('beta', firstDigest), undefined, 'the same digest is not built in beta');
    // The same bytes uploaded to beta build again, with beta's own install.
    const digest = await upload('beta', project('one'));
    assert.equal(digest, firstDigest);
    const n = driver.steps.length;
    const app = await builder.build('beta', digest, signal, undefined, OWNER);
    assert.notEqual(app.key, firstKey);
    assert.deepEqual(
      stepsSince(n).map((s) => s.id.startsWith('bld-i')),
      [true, false],
      "beta installs into its own cache: alpha's entry is not used",
    );
    assert.ok(
      mount(stepsSince(n)[1].spec, '/cache')?.hostPath.startsWith(workspaceBuildsDir(dataDir, 'beta')),
    );
  });

  it('two builds of one lockfile at once install it once', async () => {
    const lock = `${LOCK}\n\n\n`;
    const a = await upload('alpha', { ...project('five'), 'package-lock.json': lock });
    const b = await upload('alpha', { ...project('six'), 'package-lock.json': lock });
    const n = driver.steps.length;
    await Promise.all([
      builder.build('alpha', a, signal, undefined, OWNER),
      builder.build('alpha', b, signal, undefined, OWNER),
    ]);
    assert.equal(stepsSince(n).filter((s) => s.id.startsWith('bld-i')).length, 1);
  });

  it('deleting a workspace stops its build under way and removes its sources, apps, logs and cache', async () => {
    await builder.build('gamma', await upload('gamma', project('one')), signal, undefined, OWNER);
    const digest = await upload('gamma', project('seven'));
    let release!: () => void;
    hold = new Promise<void>((r) => {
      release = r;
    });
    const building = builder.build('gamma', digest, signal, undefined, OWNER);
    const key = builder.keyOf('gamma', digest);
    while (!builder.isBuilding('gamma', key)) await new Promise((r) => setTimeout(r, 5));
    const removed = builder.removeWorkspace('gamma');
    await assert.rejects(building, (err: Error) => !(err instanceof BuildError));
    release();
    hold = undefined;
    await removed;
    assert.equal(existsSync(workspaceBuildsDir(dataDir, 'gamma')), false);
    assert.equal(builder.built('gamma', digest), undefined);
    assert.equal(code.has('gamma', digest), false);
    assert.ok(existsSync(workspaceBuildsDir(dataDir, 'alpha')), "another workspace's builds stay");
  });

  it('at start, builds of workspaces that no longer exist are removed', async () => {
    await upload('delta', project('one'));
    assert.deepEqual(await builder.removeWorkspacesExcept(new Set(['alpha', 'beta'])), ['delta']);
    assert.equal(existsSync(workspaceBuildsDir(dataDir, 'delta')), false);
    assert.ok(existsSync(workspaceBuildsDir(dataDir, 'beta')));
  });

  it('a name that is not a workspace never becomes a path', () => {
    for (const ws of ['..', '_', 'a/b', ''])
      assert.throws(() => builder.builtByKey(ws, firstKey), /not a workspace name/);
  });
});
