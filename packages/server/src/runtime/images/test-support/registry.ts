// A real registry for the image tests: Debian's docker-registry (Distribution 2.8) on 127.0.0.1 on a free port,
// optionally behind htpasswd basic auth, plus a minimal push client and tar builders so each test makes its own
// images (no internet here). scripts/test.sh installs docker-registry and busybox-static.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import bcrypt from 'bcryptjs';
import { pack } from 'tar-stream';
import { Outbound } from '../../../outbound/index.js';

/**
 * The outbound client of a server with BERTH_OUTBOUND_ALLOW_CIDRS=127.0.0.0/8: these registries listen on loopback,
 * which pulls reach only when it is listed.
 */
export const loopbackOutbound = () => new Outbound({ allowCidrs: ['127.0.0.0/8'] });

export interface TestRegistry {
  host: string;
  /** The registry's storage (tests corrupt a blob there). */
  dir: string;
  auth?: { username: string; password: string };
  stop(): Promise<void>;
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });

export async function startRegistry(auth?: { username: string; password: string }): Promise<TestRegistry> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-registry-'));
  const port = await freePort();
  const lines = [
    'version: 0.1',
    'log: {level: error}',
    `storage: {filesystem: {rootdirectory: ${dir}/data}, delete: {enabled: true}}`,
    `http: {addr: "127.0.0.1:${port}"}`,
  ];
  if (auth) {
    writeFileSync(join(dir, 'htpasswd'), `${auth.username}:${bcrypt.hashSync(auth.password, 5)}\n`);
    lines.push(`auth: {htpasswd: {realm: berth-test, path: ${dir}/htpasswd}}`);
  }
  writeFileSync(join(dir, 'config.yml'), `${lines.join('\n')}\n`);
  const child: ChildProcess = spawn('docker-registry', ['serve', join(dir, 'config.yml')], {
    stdio: 'ignore',
  });
  const host = `127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const up = await fetch(`http://${host}/v2/`).then(
      () => true,
      () => false,
    );
    if (up) break;
    if (i > 200) throw new Error('docker-registry did not start');
    await new Promise((r) => setTimeout(r, 25));
  }
  return {
    host,
    dir: join(dir, 'data'),
    auth,
    async stop() {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface TarEntry {
  name: string;
  type?: 'file' | 'directory' | 'symlink' | 'link';
  body?: string | Buffer;
  linkname?: string;
  mode?: number;
}

/** A tar archive of exactly these entries (names as given: tests need `../x` and absolute ones too). */
export async function tarOf(entries: TarEntry[]): Promise<Buffer> {
  const p = pack();
  const out: Buffer[] = [];
  p.on('data', (c: unknown) => {
    out.push(c as Buffer);
  });
  const done = new Promise<void>((r) => p.on('end', () => r()));
  for (const e of entries) {
    const type = e.type ?? 'file';
    const body = typeof e.body === 'string' ? Buffer.from(e.body) : (e.body ?? Buffer.alloc(0));
    const mode = e.mode ?? (type === 'directory' ? 0o755 : 0o644);
    const header = {
      name: e.name,
      type,
      mode,
      linkname: e.linkname,
      size: type === 'file' ? body.length : 0,
    };
    await new Promise<void>((resolve, reject) =>
      p.entry(header, type === 'file' ? body : '', (err) => (err ? reject(err) : resolve())),
    );
  }
  p.finalize();
  await done;
  return Buffer.concat(out);
}

/** The static busybox of busybox-static as a layer: /bin/busybox and, unless `shell` is false, applet links. */
export async function busyboxLayer(shell = true): Promise<Buffer> {
  const bin = readFileSync('/bin/busybox');
  const applets = shell ? ['sh', 'ls', 'cat', 'echo', 'env', 'pwd', 'id', 'stat', 'touch', 'rm'] : [];
  return tarOf([
    { name: 'bin/', type: 'directory' },
    { name: 'bin/busybox', body: bin, mode: 0o755 },
    ...applets.map((a) => ({ name: `bin/${a}`, type: 'symlink' as const, linkname: 'busybox' })),
    { name: 'etc/', type: 'directory' },
    { name: 'etc/passwd', body: 'root:x:0:0:root:/root:/bin/sh\n' },
  ]);
}

/** BusyBox with what a build script needs (sh, cp, mkdir, mv, rm) and an identity in /etc/os-release. */
export async function toolsLayer(id: string): Promise<Buffer> {
  const applets = ['sh', 'cp', 'mkdir', 'mv', 'rm', 'cat', 'ls', 'env'];
  return tarOf([
    { name: 'bin/', type: 'directory' },
    { name: 'bin/busybox', body: readFileSync('/bin/busybox'), mode: 0o755 },
    ...applets.map((a) => ({ name: `bin/${a}`, type: 'symlink' as const, linkname: 'busybox' })),
    { name: 'etc/', type: 'directory' },
    { name: 'etc/passwd', body: 'root:x:0:0:root:/root:/bin/sh\n' },
    { name: 'etc/os-release', body: `ID=${id}\n` },
  ]);
}

/** This host's node at /opt/node/bin/node, with the loader and the libraries ldd says it needs. */
export async function nodeLayer(): Promise<Buffer> {
  const libs = execFileSync('ldd', [process.execPath], { encoding: 'utf8' })
    .split('\n')
    .map((l) => /(\/\S+) \(0x/.exec(l)?.[1])
    .filter((p): p is string => p !== undefined);
  const entries: TarEntry[] = [
    { name: 'opt/', type: 'directory' },
    { name: 'opt/node/', type: 'directory' },
    { name: 'opt/node/bin/', type: 'directory' },
    { name: 'opt/node/bin/node', body: readFileSync(realpathSync(process.execPath)), mode: 0o755 },
    { name: 'lib/', type: 'directory' },
    { name: 'lib/x86_64-linux-gnu/', type: 'directory' },
    { name: 'lib64/', type: 'directory' },
  ];
  for (const p of libs) {
    const base = p.split('/').at(-1) as string;
    const at = base.startsWith('ld-linux') ? `lib64/${base}` : `lib/x86_64-linux-gnu/${base}`;
    entries.push({ name: at, body: readFileSync(realpathSync(p)), mode: 0o755 });
  }
  return tarOf(entries);
}

const sha = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

export interface PushedImage {
  reference: string;
  digest: string;
  configDigest: string;
  layers: string[];
}

/** Where docker-registry keeps a blob's bytes in its storage. */
export const blobFile = (reg: TestRegistry, digest: string) => {
  const hex = digest.slice(7);
  return join(reg.dir, 'docker/registry/v2/blobs/sha256', hex.slice(0, 2), hex, 'data');
};

export class Pusher {
  constructor(private readonly reg: TestRegistry) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const a = this.reg.auth;
    return a
      ? { ...extra, authorization: `Basic ${Buffer.from(`${a.username}:${a.password}`).toString('base64')}` }
      : extra;
  }

  async blob(repo: string, bytes: Buffer, digest = sha(bytes)): Promise<string> {
    const start = await fetch(`http://${this.reg.host}/v2/${repo}/blobs/uploads/`, {
      method: 'POST',
      headers: this.headers(),
    });
    if (start.status !== 202) throw new Error(`upload start: ${start.status}`);
    const loc = new URL(start.headers.get('location') as string, `http://${this.reg.host}`);
    loc.searchParams.set('digest', digest);
    const put = await fetch(loc, {
      method: 'PUT',
      body: new Uint8Array(bytes),
      headers: this.headers({ 'content-type': 'application/octet-stream' }),
    });
    if (put.status !== 201) throw new Error(`upload: ${put.status} ${await put.text()}`);
    return digest;
  }

  async manifest(repo: string, tag: string, doc: object): Promise<string> {
    const body = Buffer.from(JSON.stringify(doc));
    const type = (doc as { mediaType: string }).mediaType;
    const res = await fetch(`http://${this.reg.host}/v2/${repo}/manifests/${tag}`, {
      method: 'PUT',
      body,
      headers: this.headers({ 'content-type': type }),
    });
    if (res.status !== 201) throw new Error(`manifest: ${res.status} ${await res.text()}`);
    return sha(body);
  }

  /** Pushes an image of these uncompressed layer tars (gzipped here) with the given config. */
  async image(
    repo: string,
    tag: string,
    layers: Buffer[],
    config: {
      Env?: string[];
      WorkingDir?: string;
      User?: string;
      Entrypoint?: string[];
      Cmd?: string[];
    } = {},
    arch = 'amd64',
  ): Promise<PushedImage> {
    const gz = layers.map((l) => gzipSync(l));
    const cfg = Buffer.from(
      JSON.stringify({
        architecture: arch,
        os: 'linux',
        config,
        rootfs: { type: 'layers', diff_ids: layers.map(sha) },
      }),
    );
    const configDigest = await this.blob(repo, cfg);
    const descs = [];
    for (const g of gz) {
      descs.push({
        mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip',
        digest: await this.blob(repo, g),
        size: g.length,
      });
    }
    const digest = await this.manifest(repo, tag, {
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: {
        mediaType: 'application/vnd.oci.image.config.v1+json',
        digest: configDigest,
        size: cfg.length,
      },
      layers: descs,
    });
    return {
      reference: `${this.reg.host}/${repo}:${tag}`,
      digest,
      configDigest,
      layers: descs.map((d) => d.digest),
    };
  }

  /** An index naming already pushed manifests by platform. */
  async index(repo: string, tag: string, entries: Array<{ digest: string; arch: string }>): Promise<string> {
    const manifests = [];
    for (const e of entries) {
      const res = await fetch(`http://${this.reg.host}/v2/${repo}/manifests/${e.digest}`, {
        headers: this.headers({ accept: 'application/vnd.oci.image.manifest.v1+json' }),
      });
      const size = (await res.arrayBuffer()).byteLength;
      manifests.push({
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        digest: e.digest,
        size,
        platform: { os: 'linux', architecture: e.arch },
      });
    }
    return this.manifest(repo, tag, {
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests,
    });
  }
}

/**
 * A front to a real registry that demands Bearer tokens the way Docker Hub does: a 401 with a
 * `WWW-Authenticate: Bearer realm=…,service=…,scope=…` challenge, a token endpoint that wants basic credentials,
 * then every request with the token is passed through to the registry behind.
 */
export async function startTokenFront(
  behind: TestRegistry,
  creds: { username: string; password: string },
): Promise<TestRegistry & { tokensIssued(): number }> {
  const { createServer: createHttp } = await import('node:http');
  const { randomBytes } = await import('node:crypto');
  const tokens = new Set<string>();
  const basic = `Basic ${Buffer.from(`${creds.username}:${creds.password}`).toString('base64')}`;
  const port = await freePort();
  const host = `127.0.0.1:${port}`;
  const srv = createHttp(async (req, res) => {
    const url = new URL(req.url ?? '/', `http://${host}`);
    if (url.pathname === '/token') {
      if (req.headers.authorization !== basic || url.searchParams.get('service') !== 'berth-test') {
        res.writeHead(401).end();
        return;
      }
      const t = randomBytes(16).toString('hex');
      tokens.add(t);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token: t }));
      return;
    }
    const auth = req.headers.authorization ?? '';
    if (!auth.startsWith('Bearer ') || !tokens.has(auth.slice(7))) {
      const repo = /^\/v2\/(.+)\/(manifests|blobs)\//.exec(url.pathname)?.[1] ?? '';
      res
        .writeHead(401, {
          'www-authenticate': `Bearer realm="http://${host}/token",service="berth-test",scope="repository:${repo}:pull"`,
        })
        .end();
      return;
    }
    const up = await fetch(`http://${behind.host}${url.pathname}${url.search}`, {
      headers: { accept: req.headers.accept ?? '*/*' },
    });
    const headers: Record<string, string> = {};
    for (const h of ['content-type', 'docker-content-digest', 'content-length'])
      if (up.headers.get(h)) headers[h] = up.headers.get(h) as string;
    res.writeHead(up.status, headers);
    res.end(Buffer.from(await up.arrayBuffer()));
  });
  await new Promise<void>((r) => srv.listen(port, '127.0.0.1', () => r()));
  return {
    host,
    dir: behind.dir,
    tokensIssued: () => tokens.size,
    async stop() {
      srv.closeAllConnections();
      await new Promise((r) => srv.close(r));
    },
  };
}

/**
 * A `docker save` archive (manifest.json, the config, one tar per layer) of these uncompressed layers under `tags`,
 * as `docker save` writes it; returns it and the image id (its config's digest).
 */
export async function savedArchive(
  layers: Buffer[],
  tags: string[],
  config: { Env?: string[]; WorkingDir?: string; User?: string; Entrypoint?: string[]; Cmd?: string[] } = {},
): Promise<{ archive: Buffer; id: string }> {
  const cfg = Buffer.from(
    JSON.stringify({
      architecture: 'amd64',
      os: 'linux',
      config,
      rootfs: { type: 'layers', diff_ids: layers.map(sha) },
    }),
  );
  const id = sha(cfg);
  const layerNames = layers.map((l) => `${sha(l).slice(7)}/layer.tar`);
  const manifest = [{ Config: `${id.slice(7)}.json`, RepoTags: tags, Layers: layerNames }];
  const archive = await tarOf([
    { name: 'manifest.json', body: JSON.stringify(manifest) },
    { name: `${id.slice(7)}.json`, body: cfg },
    ...layers.map((l, i) => ({ name: layerNames[i], body: l })),
  ]);
  return { archive, id };
}
