// Dockerfile builds on real sandboxes (needs root; run under the runtime flock): a BusyBox base pushed to a loopback
// registry, multi-stage builds with every supported instruction, the layers as real OCI layers (whiteouts for
// deletions), the per-workspace cache (hits, a changed COPY source rerunning from there, another workspace starting
// cold), a failing RUN naming itself, FROM scratch with ADD of a root file system, and the built image run as a sandbox.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { extract } from 'tar-stream';
import { ImageStore } from '../../runtime/images/image-store.js';
import {
  loopbackOutbound,
  Pusher,
  startRegistry,
  type TarEntry,
  type TestRegistry,
  tarOf,
} from '../../runtime/images/test-support/registry.js';
import { Instances } from '../../runtime/instances.js';
import { createLinuxDriver, type LinuxDriver } from '../../runtime/linux/linux-driver.js';
import { callSocket } from '../../runtime/linux/test-support/mini-daemon.js';
import { smallSandboxSpec } from '../../test-support/sandbox-spec.js';
import { applyDockerignore } from './context.js';
import { buildImage, ImageBuildError } from './engine.js';

const T = { timeout: 240_000 };
let dataDir: string;
let driver: LinuxDriver;
let images: ImageStore;
let reg: TestRegistry;
let base: string;

const APPLETS = [
  'sh',
  'ls',
  'cat',
  'echo',
  'mkdir',
  'rm',
  'cp',
  'id',
  'touch',
  'env',
  'pwd',
  'chmod',
  'ln',
  'wc',
  'stat',
  'tar',
];

/** BusyBox with the applets a RUN uses, a user `app` (1000) and a /tmp. */
async function toolsLayer(): Promise<Buffer> {
  const entries: TarEntry[] = [
    { name: 'bin/', type: 'directory' },
    { name: 'bin/busybox', body: readFileSync('/bin/busybox'), mode: 0o755 },
    ...APPLETS.map((a) => ({ name: `bin/${a}`, type: 'symlink' as const, linkname: 'busybox' })),
    { name: 'etc/', type: 'directory' },
    { name: 'etc/passwd', body: 'root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n' },
    { name: 'etc/group', body: 'root:x:0:\napp:x:1000:\n' },
    { name: 'tmp/', type: 'directory', mode: 0o1777 },
    { name: 'gone.txt', body: 'the base has it\n' },
  ];
  return tarOf(entries);
}

function context(files: Record<string, string>): string {
  const dir = mkdtempSync(join(dataDir, 'ctx-'));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  applyDockerignore(dir);
  return dir;
}

async function build(
  workspace: string,
  dir: string,
  name: string,
  extra: { buildArgs?: Record<string, string>; target?: string } = {},
) {
  let log = '';
  const image = await buildImage(
    { dataDir, instances: new Instances({ driver }), images },
    { workspace, contextDir: dir, dockerfile: readFileSync(join(dir, 'Dockerfile'), 'utf8'), name, ...extra },
    (t) => {
      log += t;
    },
    AbortSignal.timeout(200_000),
  );
  return { image, log };
}

async function run(socketPath: string, command: string) {
  const r = await callSocket(socketPath, 'POST', '/process', { command, waitForCompletion: true });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body as { exitCode: number; stdout: string; stderr: string };
}

/** The names in a gzip layer blob of the store. */
async function layerNames(digest: string): Promise<string[]> {
  const ex = extract();
  const names: string[] = [];
  const done = (async () => {
    for await (const e of ex) {
      names.push(e.header.name);
      e.resume();
    }
  })();
  ex.end(gunzipSync(readFileSync(images.blobs.path(digest))));
  await done;
  return names;
}

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'berth-dfbuild-'));
  reg = await startRegistry();
  images = new ImageStore({ dataDir, outbound: loopbackOutbound() });
  driver = await createLinuxDriver({ dataDir, images });
  base = (await new Pusher(reg).image('test/tools', '1', [await toolsLayer()], { Env: ['PATH=/bin'] }))
    .reference;
});

after(async () => {
  for (const s of await driver.list()) await driver.remove(s.id);
  await driver.close();
  await reg.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const MULTI = (from: string) => `# syntax=docker/dockerfile:1
ARG BASE=${from}
FROM \${BASE} AS builder
ARG GREETING=hello
WORKDIR /src
COPY app/ ./
RUN echo "$GREETING from RUN" > built.txt && rm /gone.txt && mkdir -p /out && cp built.txt main.txt /out/
FROM \${BASE}
LABEL org.example.who="tests"
ENV APP_HOME=/srv/app
WORKDIR $APP_HOME
COPY --from=builder /out/ ./
COPY --chmod=700 run.sh /usr/local/bin/
USER app
RUN id -u > whoami.txt 2>&1 || echo $? ; touch /tmp/mine
EXPOSE 8080
ENTRYPOINT ["/bin/sh"]
CMD ["-c", "cat /srv/app/main.txt"]
`;

describe('Dockerfile builds', () => {
  it(
    'multi-stage: every supported instruction, real OCI layers, .dockerignore, and the image runs as a sandbox',
    T,
    async () => {
      const dir = context({
        Dockerfile: MULTI(base),
        'app/main.txt': 'main v1\n',
        'app/secret.env': 'TOKEN=x\n',
        'run.sh': '#!/bin/sh\necho run\n',
        '.dockerignore': 'app/*.env\n',
      });
      const { image, log } = await build('ws-a', dir, 'local/multi:1', { buildArgs: { GREETING: 'hi' } });
      assert.match(log, /Step 1\/\d+ : FROM/);
      assert.match(log, /note: the syntax directive/);
      assert.deepEqual(image.references, ['docker.io/local/multi:1']);
      assert.deepEqual(image.config.entrypoint, ['/bin/sh']);
      assert.deepEqual(image.config.cmd, ['-c', 'cat /srv/app/main.txt']);
      assert.equal(image.config.workingDir, '/srv/app');
      assert.equal(image.config.user, 'app');
      assert.deepEqual(image.config.exposedPorts, ['8080/tcp']);
      assert.equal(image.config.labels?.['org.example.who'], 'tests');
      assert.ok(image.config.env.includes('APP_HOME=/srv/app'));
      // The final stage: the base's layer plus its own (the builder's layers are not in it).
      const names = (await Promise.all(image.layers.slice(1).map((l) => layerNames(l.digest)))).flat();
      assert.ok(names.includes('srv/app/main.txt') && names.includes('srv/app/built.txt'), names.join(' '));
      assert.ok(!names.some((n) => n.includes('secret.env')), '.dockerignore kept the secret out');
      assert.ok(!names.some((n) => n.startsWith('opt/berth') || n === 'etc/hosts'), 'nothing of the runtime');
      const rootfs = images.get(image.id)!.rootfs;
      assert.equal(readFileSync(join(rootfs, 'srv/app/built.txt'), 'utf8'), 'hi from RUN\n');
      assert.equal(readFileSync(join(rootfs, 'srv/app/whoami.txt'), 'utf8'), '1000\n', 'RUN ran as USER app');
      assert.equal(
        readFileSync(join(rootfs, 'gone.txt'), 'utf8'),
        'the base has it\n',
        "the builder's rm stays there",
      );
      // A sandbox on the image: its files, its user.
      const s = await driver.ensure('df-run', smallSandboxSpec({ image: image.id }));
      try {
        assert.equal(
          (await run(s.socketPath, '/bin/sh -c "cat /srv/app/main.txt; /usr/local/bin/run.sh; id -u"'))
            .stdout,
          'main v1\nrun\n1000\n',
        );
      } finally {
        await driver.remove('df-run');
      }
    },
  );

  it('a deletion is a whiteout in its layer; the image has the file removed', T, async () => {
    const dir = context({ Dockerfile: `FROM ${base}\nRUN rm /gone.txt && mkdir /d && echo x > /d/f\n` });
    const { image } = await build('ws-a', dir, 'local/wh:1');
    const names = await layerNames(image.layers.at(-1)!.digest);
    assert.ok(names.includes('.wh.gone.txt'), names.join(' '));
    assert.ok(names.includes('d/f'));
    assert.equal(
      (() => {
        try {
          return readFileSync(join(images.get(image.id)!.rootfs, 'gone.txt'), 'utf8');
        } catch {
          return 'absent';
        }
      })(),
      'absent',
    );
  });

  it(
    'a rebuild with nothing changed runs nothing; a changed COPY source reruns from that step; another workspace starts cold',
    T,
    async () => {
      const files = {
        Dockerfile: `FROM ${base}\nRUN echo one > /one\nCOPY a.txt /a.txt\nRUN cat /a.txt > /copy\n`,
        'a.txt': 'v1\n',
      };
      const first = await build('ws-a', context(files), 'local/cache:1');
      assert.equal(first.log.match(/Using cache/g)?.length ?? 0, 0);
      const again = await build('ws-a', context(files), 'local/cache:1');
      assert.equal(again.log.match(/Using cache/g)?.length, 3, again.log);
      assert.equal(again.image.id, first.image.id, 'the same image');
      const changed = await build('ws-a', context({ ...files, 'a.txt': 'v2\n' }), 'local/cache:2');
      assert.equal(changed.log.match(/Using cache/g)?.length, 1, 'only the RUN before the COPY is cached');
      assert.equal(readFileSync(join(images.get(changed.image.id)!.rootfs, 'copy'), 'utf8'), 'v2\n');
      const other = await build('ws-b', context(files), 'local/cache:1');
      assert.equal(
        other.log.match(/Using cache/g)?.length ?? 0,
        0,
        "a workspace never uses another's layers",
      );
    },
  );

  it(
    'a failing RUN fails the build naming the instruction and its output; nothing is installed',
    T,
    async () => {
      const dir = context({ Dockerfile: `FROM ${base}\nRUN echo about to fail && exit 3\n` });
      let log = '';
      await assert.rejects(
        buildImage(
          { dataDir, instances: new Instances({ driver }), images },
          {
            workspace: 'ws-a',
            contextDir: dir,
            dockerfile: readFileSync(join(dir, 'Dockerfile'), 'utf8'),
            name: 'local/fail:1',
          },
          (t) => {
            log += t;
          },
          AbortSignal.timeout(200_000),
        ),
        (e: Error) =>
          e instanceof ImageBuildError &&
          /RUN echo about to fail && exit 3: the command exited with code 3/.test(e.message) &&
          e.step?.line === 2,
      );
      assert.match(log, /about to fail/);
      assert.equal(images.find('ws-a', 'local/fail:1'), undefined);
      assert.equal(
        (await driver.list()).filter((s) => s.id.startsWith('bld-')).length,
        0,
        'no build sandbox left',
      );
    },
  );

  it('FROM scratch with ADD of a root file system tar: an image with no registry at all', T, async () => {
    const rootfsTar = await toolsLayer();
    const dir = context({
      Dockerfile: 'FROM scratch\nADD rootfs.tar /\nENV PATH=/bin\nRUN echo made > /made\nCMD ["sh"]\n',
    });
    writeFileSync(join(dir, 'rootfs.tar'), rootfsTar);
    const { image } = await build('ws-a', dir, 'local/scratch:1');
    assert.equal(image.layers.length, 2, 'the ADD and the RUN');
    const s = await driver.ensure('df-scratch', smallSandboxSpec({ image: image.id }));
    try {
      assert.equal((await run(s.socketPath, 'cat /made')).stdout, 'made\n');
    } finally {
      await driver.remove('df-scratch');
    }
  });
});
