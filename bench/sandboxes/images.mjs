// bench/sandboxes images: a ~100 MB three-layer image (busybox, Python's stdlib, Perl's) built with umoci and
// pushed with skopeo to a loopback docker-registry, then
//   1. pull + unpack by Berth's store vs `skopeo copy` + `umoci unpack` of the same image (target: no slower);
//   2. create -> first exec of a sandbox on the pulled image vs on the default image (target <= 1.2x);
//   3. disk of N sandboxes of the image vs one unpacked copy (target <= 1.05x).
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Outbound } from '../../packages/server/dist/outbound/index.js';
import { ImageStore } from '../../packages/server/dist/runtime/images/image-store.js';
import { header, row } from '../lib/report.mjs';
import { percentile, startSandboxBerth, timed } from './lib.mjs';

const RUNS = Number(process.env.BENCH_IMAGE_RUNS ?? 3);
const CREATES = Number(process.env.BENCH_IMAGE_CREATES ?? 10);
const DENSITY = Number(process.env.BENCH_IMAGE_SANDBOXES ?? 50);
const sh = (cmd, args) => execFileSync(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'] });
const du = (paths) =>
  Number(
    execFileSync('du', ['-sbxc', ...paths])
      .toString()
      .trim()
      .split('\n')
      .at(-1)
      .split('\t')[0],
  );

async function registry(dir) {
  const port = await new Promise((r) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => r(p));
    });
  });
  writeFileSync(
    join(dir, 'r.yml'),
    `version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: ${dir}/reg}}\nhttp: {addr: "127.0.0.1:${port}"}\n`,
  );
  const child = spawn('docker-registry', ['serve', join(dir, 'r.yml')], { stdio: 'ignore' });
  for (let i = 0; i < 400; i++) {
    if (
      await fetch(`http://127.0.0.1:${port}/v2/`).then(
        () => true,
        () => false,
      )
    )
      break;
    await new Promise((r) => setTimeout(r, 25));
  }
  return { host: `127.0.0.1:${port}`, stop: () => child.kill('SIGKILL') };
}

/** An OCI layout with three layers made by umoci from host directories, pushed to the registry. */
function buildImage(dir, host) {
  const layout = join(dir, 'layout');
  const bundle = join(dir, 'bundle');
  sh('umoci', ['init', '--layout', layout]);
  sh('umoci', ['new', '--image', `${layout}:v1`]);
  const layers = [
    (root) => {
      mkdirSync(join(root, 'bin'), { recursive: true });
      cpSync('/bin/busybox', join(root, 'bin/busybox'));
      for (const a of ['sh', 'true', 'ls', 'cat']) symlinkSync('busybox', join(root, 'bin', a));
    },
    (root) => cpSync('/usr/lib/python3.11', join(root, 'usr/lib/python3.11'), { recursive: true }),
    (root) => cpSync('/usr/share/perl', join(root, 'usr/share/perl'), { recursive: true }),
  ];
  for (const add of layers) {
    rmSync(bundle, { recursive: true, force: true });
    sh('umoci', ['unpack', '--image', `${layout}:v1`, bundle]);
    add(join(bundle, 'rootfs'));
    sh('umoci', ['repack', '--image', `${layout}:v1`, bundle]);
  }
  sh('umoci', ['config', '--image', `${layout}:v1`, '--config.env', 'PATH=/bin']);
  sh('skopeo', [
    'copy',
    '--quiet',
    '--dest-tls-verify=false',
    `oci:${layout}:v1`,
    `docker://${host}/bench/img:v1`,
  ]);
  rmSync(bundle, { recursive: true, force: true });
  return `${host}/bench/img:v1`;
}

export async function benchImages() {
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-img-'));
  const reg = await registry(dir);
  try {
    const ref = buildImage(dir, reg.host);
    // The registry listens on loopback, which outbound requests reach only when it is listed (decision 038).
    const loopback = new Outbound({ allowCidrs: ['127.0.0.0/8'] });
    const ours = [];
    const theirs = [];
    for (let i = 0; i < RUNS; i++) {
      const d = join(dir, `ours-${i}`);
      ours.push(await timed(() => new ImageStore({ dataDir: d, outbound: loopback }).pull('bench', ref)));
      const t = join(dir, `theirs-${i}`);
      mkdirSync(t);
      theirs.push(
        await timed(async () => {
          sh('skopeo', [
            'copy',
            '--quiet',
            '--src-tls-verify=false',
            `docker://${ref}`,
            `oci:${t}/layout:v1`,
          ]);
          sh('umoci', ['unpack', '--image', `${t}/layout:v1`, `${t}/bundle`]);
        }),
      );
    }
    const size = du([join(dir, 'ours-0', 'images', 'oci', 'roots')]);
    header(
      `images: pull + unpack of a ${(size / 1e6).toFixed(0)} MB three-layer image from a loopback registry (${RUNS} runs)`,
    );
    const pullRatio = row(
      'berth pull + unpack p50 (vs skopeo copy + umoci unpack)',
      percentile(ours, 50),
      percentile(theirs, 50),
      'ms',
      'no slower (<= 1.0)',
    );
    for (let i = 0; i < RUNS; i++) rmSync(join(dir, `theirs-${i}`), { recursive: true, force: true });

    // The registry listens on loopback: pulls reach it only when it is listed. 2 × CREATES sandboxes of 2 GB are
    // kept until the phase ends: past the default quotas, which are not what is measured.
    const berth = await startSandboxBerth({
      BERTH_STANDBY_AFTER: '600',
      BERTH_OUTBOUND_ALLOW_CIDRS: '127.0.0.0/8',
      BERTH_QUOTA_MEMORY_MB: '1000000',
      BERTH_QUOTA_SANDBOXES: '1000',
    });
    try {
      await berth.call('POST', '/v0/images', { reference: ref });
      const firstExec = async (name, spec) =>
        timed(async () => {
          await berth.create(name, spec);
          const p = await berth.call('POST', `${berth.sandboxPath(name)}/process`, {
            command: 'true',
            waitForCompletion: true,
          });
          if (p.exitCode !== 0) throw new Error(`exec failed: ${JSON.stringify(p)}`);
        });
      await firstExec('warm-up', {});
      const img = [];
      const base = [];
      for (let i = 0; i < CREATES; i++) {
        await new Promise((r) => setTimeout(r, 1000)); // the default image's warm pool refills between creates
        base.push(await firstExec(`host-${i}`, {}));
        img.push(await firstExec(`img-${i}`, { runtime: { image: ref } }));
      }
      header(`images: create -> first exec (${CREATES} each, spaced 1 s)`);
      // BENCH_IMAGE_TRACE=1: every create's time, in order (an image's pool refilled late shows as every other one slow).
      if (process.env.BENCH_IMAGE_TRACE === '1')
        console.log(
          `image: ${img.map((x) => x.toFixed(1)).join(' ')}\ndefault: ${base.map((x) => x.toFixed(1)).join(' ')}`,
        );
      const createRatio = row(
        'image sandbox p50 (vs default image)',
        percentile(img, 50),
        percentile(base, 50),
        'ms',
        '<= 1.2x',
      );
      row('image sandbox p99 (vs default image)', percentile(img, 99), percentile(base, 99), 'ms');
      await berth.removeAll();
      const root = (await berth.call('GET', `/v0/images/${ref}`)).id.slice(7);
      const rootDir = join(berth.dataDir, 'images', 'oci', 'roots', root);
      const one = du([rootDir]);
      const names = [];
      for (let i = 0; i < DENSITY; i++) {
        names.push(`dense-${i}`);
        await berth.call('POST', '/v0/sandboxes', {
          metadata: { name: `dense-${i}` },
          spec: { runtime: { image: ref, memory: 256 } },
        });
      }
      // Every sandbox's own files: its writable layer (a tmpfs under /run/berth/sbx) plus the shared root once.
      const layers = execFileSync('sh', ['-c', 'ls -d /run/berth/sbx/*']).toString().trim().split('\n');
      const all = du([rootDir, ...layers]);
      header(`images: disk of ${DENSITY} sandboxes of one image vs one unpacked copy`);
      const diskRatio = row(
        `${DENSITY} sandboxes (shared root + their layers)`,
        all / 1e6,
        one / 1e6,
        'MB',
        '<= 1.05x',
      );
      await berth.removeAll();
      return { pullRatio, createRatio, diskRatio };
    } finally {
      await berth.stop();
    }
  } finally {
    reg.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
