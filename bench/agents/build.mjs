// bench/agents build: the TypeScript agent template uploaded and built until DEPLOYED, with Berth's dependency
// cache cold (its lockfile not seen before in the workspace: the install step runs `npm ci` in a sandbox of its own
// and the server seals node_modules into the cache) and warm (a second agent, other source, same lockfile:
// node_modules copied from the sealed entry), beside `npm ci` of the same project alone on the host. Both npm ci
// download the same packages from the registry (the host's own npm with an empty cache of its own), since the
// install step sees only package.json and the lockfile (decision 036): no npm cache can be handed to it. So the cold
// figures include the registry's answers on both sides; the warm one downloads nothing.
import { execFileSync } from 'node:child_process';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { header, row } from '../lib/report.mjs';
import { startSandboxBerth, timed } from '../sandboxes/lib.mjs';
import { deployZip } from './deploy.mjs';

const TEMPLATE = new URL('../../templates/agent-typescript', import.meta.url).pathname;

export function filesOf(dir) {
  const out = {};
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out[relative(dir, p)] = readFileSync(p);
    }
  };
  walk(dir);
  return out;
}

export async function benchAgentsBuild() {
  const work = mkdtempSync(join(tmpdir(), 'berth-bench-build-'));
  const berth = await startSandboxBerth();
  const auth = { authorization: `Bearer ${berth.key}` };
  try {
    const files = filesOf(TEMPLATE);
    const spec = { runtime: { memory: 512 } };
    const cold = await deployZip(berth, 'agents', 'ts-cold', { spec, files });
    const logs = join(berth.dataDir, 'builds', 'workspaces', 'default', 'logs');
    const log = (name) => {
      const o = readdirSync(logs).map((f) => join(logs, f));
      return (
        o.sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs).map((f) => readFileSync(f, 'utf8'))[0] ??
        name
      );
    };
    if (!/dependency cache miss/.test(log('cold')))
      throw new Error(`the cold build did not run npm ci:\n${log('cold')}`);
    // Other source (a comment), same lockfile: the dependency cache hits.
    const src = files['src/index.ts'].toString('utf8');
    const warm = await deployZip(berth, 'agents', 'ts-warm', {
      spec,
      files: { ...files, 'src/index.ts': `// warm\n${src}` },
    });
    if (!/dependency cache hit/.test(log('warm')))
      throw new Error(`the warm build did not hit the cache:\n${log('warm')}`);

    // npm ci of the same project on the host, from the registry into an empty npm cache.
    const alone = join(work, 'alone');
    cpSync(TEMPLATE, alone, { recursive: true });
    mkdirSync(join(work, 'npm'));
    writeFileSync(join(alone, '.npmrc'), `cache=${join(work, 'npm')}\naudit=false\nfund=false\n`);
    const npmCi = await timed(async () =>
      execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: alone, stdio: 'ignore' }),
    );
    const tsc = await timed(async () => execFileSync('npx', ['tsc'], { cwd: alone, stdio: 'ignore' }));

    header(
      'agents: build and deploy of the TypeScript template (upload to DEPLOYED; npm ci from the registry)',
    );
    row('cold dependency cache: upload to DEPLOYED (vs npm ci alone)', cold, npmCi, 'ms');
    row('warm dependency cache: upload to DEPLOYED (vs npm ci alone)', warm, npmCi, 'ms');
    row('warm dependency cache: upload to DEPLOYED (vs cold)', warm, cold, 'ms');
    row('npm ci + tsc alone on the host (vs npm ci alone)', npmCi + tsc, npmCi, 'ms');
  } finally {
    for (const name of ['ts-cold', 'ts-warm'])
      await fetch(`${berth.url}/v0/agents/${name}`, { method: 'DELETE', headers: auth }).catch(
        () => undefined,
      );
    const { createLinuxDriver } = await import('../../packages/server/dist/runtime/index.js');
    const driver = await createLinuxDriver({ dataDir: berth.dataDir, netPoolSize: 0 });
    for (let i = 0; i < 600 && (await driver.list()).some((s) => s.id.startsWith('wl-')); i++)
      await new Promise((r) => setTimeout(r, 100));
    await driver.close();
    await berth.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchAgentsBuild();
