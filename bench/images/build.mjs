// bench/images build (decision 051): the TypeScript agent template built from a Dockerfile by `POST /v0/images/build`
// on a base made with no registry at all (FROM scratch, ADD of a tar of BusyBox, this host's node and npm), beside
// `npm ci` of the same project alone on the host (both download the same packages from the npm registry into empty
// caches); then a rebuild with nothing changed (every step from the layer cache) and one after a change to one source
// file (npm ci cached, the COPY of the sources and the build run again). The RUN steps reach the registry under the
// sandboxes' default policy: where it resolves to a reserved range (a proxy of the machine), open that range with
// BERTH_SANDBOX_ALLOW_CIDRS.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { header, row } from '../lib/report.mjs';
import { startSandboxBerth, timed } from '../sandboxes/lib.mjs';

const TEMPLATE = new URL('../../templates/agent-typescript', import.meta.url).pathname;

const DOCKERFILE = `FROM scratch
ADD base.tar /
ENV PATH=/usr/local/bin:/usr/bin:/bin HOME=/root NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build
CMD ["node", "dist/index.js"]
`;

/** A root file system tar: static BusyBox as /bin, this host's node with the libraries ldd names, its npm. */
function baseTar(dir) {
  const root = join(dir, 'base');
  mkdirSync(join(root, 'bin'), { recursive: true });
  cpSync('/bin/busybox', join(root, 'bin/busybox'));
  for (const a of ['sh', 'ls', 'cat', 'mkdir', 'rm', 'cp', 'env'])
    execFileSync('ln', ['-s', 'busybox', join(root, 'bin', a)]);
  mkdirSync(join(root, 'usr/bin'), { recursive: true });
  cpSync(realpathSync(process.execPath), join(root, 'usr/bin/node'));
  const libs = execFileSync('ldd', [process.execPath], { encoding: 'utf8' })
    .split('\n')
    .map((l) => /(\/\S+) \(0x/.exec(l)?.[1])
    .filter(Boolean);
  for (const p of libs) {
    const at = join(root, p);
    mkdirSync(join(at, '..'), { recursive: true });
    cpSync(realpathSync(p), at);
  }
  cpSync('/usr/lib/node_modules/npm', join(root, 'usr/lib/node_modules/npm'), { recursive: true });
  execFileSync('ln', ['-s', '../lib/node_modules/npm/bin/npm-cli.js', join(root, 'usr/bin/npm')]);
  // npm's scripts start with `#!/usr/bin/env node`.
  execFileSync('ln', ['-s', '/bin/busybox', join(root, 'usr/bin/env')]);
  mkdirSync(join(root, 'tmp'), { mode: 0o1777 });
  mkdirSync(join(root, 'etc'));
  writeFileSync(join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
  // This host's CA bundle, as a base image carries one (and any proxy's CA the host trusts).
  mkdirSync(join(root, 'etc/ssl/certs'), { recursive: true });
  cpSync('/etc/ssl/certs/ca-certificates.crt', join(root, 'etc/ssl/certs/ca-certificates.crt'));
  execFileSync('tar', ['-C', root, '--numeric-owner', '-cf', join(dir, 'base.tar'), '.']);
  rmSync(root, { recursive: true, force: true });
}

/** POST /v0/images/build with the context dir; resolves with the log once the image is built. */
async function build(berth, ctx, name) {
  const body = execFileSync('tar', ['-C', ctx, '-cf', '-', '.'], { maxBuffer: 1 << 30 });
  const res = await fetch(`${berth.url}/v0/images/build?t=${encodeURIComponent(name)}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${berth.key}`, 'content-type': 'application/x-tar' },
    body,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`build: ${res.status} ${text}`);
  const lines = text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  const failed = lines.find((l) => l.error);
  if (failed) throw new Error(`build failed: ${failed.error}\n${lines.map((l) => l.stream ?? '').join('')}`);
  return lines.map((l) => l.stream ?? '').join('');
}

export async function benchImageBuild() {
  const work = mkdtempSync(join(tmpdir(), 'berth-bench-dfbuild-'));
  const berth = await startSandboxBerth();
  try {
    const ctx = join(work, 'ctx');
    cpSync(TEMPLATE, ctx, { recursive: true });
    rmSync(join(ctx, 'node_modules'), { recursive: true, force: true });
    writeFileSync(join(ctx, 'Dockerfile'), DOCKERFILE);
    writeFileSync(join(ctx, '.dockerignore'), 'node_modules\ndist\n');
    baseTar(ctx);
    const cold = await timed(() => build(berth, ctx, 'bench/app:1'));
    let log = '';
    const same = await timed(async () => {
      log = await build(berth, ctx, 'bench/app:1');
    });
    if ((log.match(/Using cache/g) ?? []).length < 6)
      throw new Error(`the rebuild was not all cached:\n${log}`);
    const src = join(ctx, 'src/index.ts');
    writeFileSync(src, `// changed\n${readFileSync(src, 'utf8')}`);
    const oneFile = await timed(() => build(berth, ctx, 'bench/app:2'));

    // npm ci of the same project on the host, from the registry into an empty npm cache.
    const alone = join(work, 'alone');
    cpSync(TEMPLATE, alone, { recursive: true });
    mkdirSync(join(work, 'npm'));
    writeFileSync(join(alone, '.npmrc'), `cache=${join(work, 'npm')}\naudit=false\nfund=false\n`);
    const npmCi = await timed(async () =>
      execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: alone, stdio: 'ignore' }),
    );
    header(
      'images: Dockerfile build of the TypeScript template (FROM scratch + ADD base.tar; npm ci from the registry)',
    );
    row('cold build, every step run (vs npm ci alone)', cold, npmCi, 'ms');
    row('rebuild with nothing changed (vs npm ci alone)', same, npmCi, 'ms', '< 1000 ms');
    row('rebuild after one source file changed (vs npm ci alone)', oneFile, npmCi, 'ms');
  } finally {
    await berth.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchImageBuild();
