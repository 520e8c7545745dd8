// One build: an uploaded source (by digest) → a content-addressed app directory `<dataDir>/builds/apps/<key>`,
// made inside a build sandbox (never on the host): the source bound read-only at /src, the output at /app, the
// workspace's dependency cache at /cache. The key hashes the source digest and the plan, so the same code builds
// once. The build log is kept per key (`builds/logs/<key>.log`) and read while it grows.
//
// The base image (decision 035): the default image (the host userland), or `spec.runtime.image` naming an image the
// workspace holds in the image store. The build sandbox runs on that image, so its own node/python/npm/pip build
// the app; the app directory is then bound at /app of replicas running the same image. The key hashes the image
// id too: the same source on another image (or on a re-imported name) is another build.
import { createHash } from 'node:crypto';
import {
  appendFileSync,
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { isDefaultImage } from '../kinds/image-reference.js';
import type { Outbound } from '../outbound/index.js';
import { defaultCpuShares, type RuntimeDriver } from '../runtime/driver.js';
import { ImageError } from '../runtime/images/errors.js';
import type { ImageStore, StoredImage } from '../runtime/images/image-store.js';
import { APP_MOUNT, buildScript, CACHE_MOUNT, SRC_MOUNT, shq } from './build-script.js';
import type { CodeStore } from './code-store.js';
import { execStreamed } from './daemon-exec.js';
import { fetchGitSource, type GitRepository, type GitSourceInfo } from './git-source.js';
import { ManifestError } from './manifest.js';
import { type BuildPlan, PlanError, planBuild } from './plan.js';
import { extractZip, UnsafeArchiveError } from './zip-extract.js';

/** Bumped when the build steps change, so an app built by older steps is not reused. */
const BUILDER_VERSION = '1';
/** Memory of a build sandbox: npm ci and tsc of a mid-size project fit. */
export const BUILD_MEMORY_MB = 2048;
/** A build that runs longer is stopped and FAILED (the service bounds builds similarly). */
export const BUILD_TIMEOUT_S = 900;
/** Lines of the build log an event of a failed build carries. */
export const FAILED_LOG_LINES = 20;
/** The image builds run on when the spec names none: the host userland. */
export const BUILD_IMAGE = 'blaxel/base-image:latest';

/** A stored image a build and its replicas run on instead of the default one. */
export interface BaseImage {
  /** The name the spec gives. */
  name: string;
  /**
   * The image id (`sha256:<config hex>`): what the build sandbox and the replicas name, so a built revision keeps
   * running the files it was built on even when the name is imported again with other content.
   */
  id: string;
  /** The image config's PATH, if it sets one: replicas search the app's tools first, then it. */
  path?: string;
}

export interface BuiltApp {
  key: string;
  dir: string;
  plan: BuildPlan;
  /** The image it was built on; none: the default image. */
  base?: BaseImage;
  /** Built earlier: nothing ran. */
  cached: boolean;
}

/** `spec.runtime.image` cannot be used (not in the workspace's images): the object is FAILED saying how to fix it. */
export class BaseImageError extends Error {
  override name = 'BaseImageError';
}

export class BuildError extends Error {
  override name = 'BuildError';
  constructor(
    message: string,
    readonly logTail: string,
  ) {
    super(message);
  }
}

export interface BuilderDeps {
  dataDir: string;
  driver: RuntimeDriver;
  code: CodeStore;
  logger?: Logger;
  waitHealthy: (socketPath: string, signal?: AbortSignal) => Promise<unknown>;
  /** Local paths and file:// may be cloned (BERTH_GIT_ALLOW_LOCAL; see git-source.ts). */
  gitAllowLocal?: boolean;
  /** The outbound client a clone's host is judged and pinned by. */
  outbound: Outbound;
  /** The server's image store: where a `spec.runtime.image` other than the default is looked up. */
  images?: ImageStore;
}

/**
 * Makes a tree readable by every uid (dirs 0755, files 0644, or 0755 when executable): the server runs with umask
 * 077, and the build sandbox, then each replica, runs as another unprivileged uid that must read it.
 */
export function makeReadable(dir: string): void {
  chmodSync(dir, 0o755);
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) makeReadable(p);
    else if (e.isFile()) chmodSync(p, (readFileMode(p) & 0o111) !== 0 ? 0o755 : 0o644);
  }
}

const readFileMode = (p: string) => statSync(p).mode;

export const tailOf = (text: string, n = FAILED_LOG_LINES) => text.trimEnd().split('\n').slice(-n).join('\n');

export class Builder {
  readonly appsDir: string;
  readonly logsDir: string;
  private readonly workDir: string;
  private readonly depsDir: string;
  /** Keys whose build runs in this process: a followed log ends when its key leaves this set. */
  private readonly running = new Set<string>();

  constructor(private readonly deps: BuilderDeps) {
    const root = join(deps.dataDir, 'builds');
    this.appsDir = join(root, 'apps');
    this.logsDir = join(root, 'logs');
    this.workDir = join(root, 'work');
    this.depsDir = join(root, 'deps');
    for (const d of [this.appsDir, this.logsDir, this.workDir, this.depsDir])
      mkdirSync(d, { recursive: true });
    // Clones left by a server killed mid-clone (git-source.ts): nothing clones before this constructor returns.
    for (const e of readdirSync(this.workDir))
      if (e.startsWith('git-')) rmSync(join(this.workDir, e), { recursive: true, force: true });
  }

  /** Clones a spec's git repository into the code store, as an upload would store it (git-source.ts). */
  fetchGit(repo: GitRepository, signal: AbortSignal): Promise<GitSourceInfo> {
    const { code, gitAllowLocal, outbound } = this.deps;
    return fetchGitSource(repo, {
      code,
      workDir: this.workDir,
      allowLocal: gitAllowLocal === true,
      outbound,
      signal,
    });
  }

  /**
   * The image `name` (a spec's runtime.image) stands for in `workspace`: undefined for the default image; a
   * BaseImageError when the workspace holds no such image. Looked up in the store only (never pulled here): the
   * build pins the image's content, so which content is the user's explicit pull or import.
   */
  baseImage(workspace: string, name: string | undefined): BaseImage | undefined {
    if (isDefaultImage(name)) return undefined;
    let image: StoredImage | undefined;
    try {
      image = this.deps.images?.find(workspace, name as string);
    } catch (err) {
      // A name stored before it was checked at write (a malformed one is a 422 now).
      if (err instanceof ImageError) throw new BaseImageError(err.message);
      throw err;
    }
    if (!image)
      throw new BaseImageError(
        `image ${name} is not in this workspace's images: import it (berth image import <archive.tar> --name ${name}, or POST /v0/images/import?name=${name}) or pull it (berth image pull ${name}), then deploy again`,
      );
    const path = image.config.env.find((e) => e.startsWith('PATH='))?.slice('PATH='.length);
    return { name: name as string, id: image.id, ...(path ? { path } : {}) };
  }

  /** The build key of a source on a base image (none: the default image): the app directory's name once built. */
  keyOf(sourceDigest: string, base?: BaseImage): string {
    // The default image's key is what it was before images existed, so apps built then are still found.
    const input = `${BUILDER_VERSION}\0${sourceDigest}${base ? `\0${base.id}` : ''}`;
    return createHash('sha256').update(input).digest('hex').slice(0, 32);
  }

  logPath(key: string): string {
    return join(this.logsDir, `${key}.log`);
  }

  hasLog(key: string): boolean {
    return existsSync(this.logPath(key));
  }

  readLog(key: string): string | undefined {
    return existsSync(this.logPath(key)) ? readFileSync(this.logPath(key), 'utf8') : undefined;
  }

  /** Whether the build of `key` runs now (its log may still grow). */
  isBuilding(key: string): boolean {
    return this.running.has(key);
  }

  /** The app built from this source on this base image earlier, if any. */
  built(sourceDigest: string, base?: BaseImage): BuiltApp | undefined {
    return this.builtByKey(this.keyOf(sourceDigest, base));
  }

  /** A built app by its key (a revision names it so): rollbacks run it again without a build. */
  builtByKey(key: string): BuiltApp | undefined {
    if (!/^[0-9a-f]{32}$/.test(key)) return undefined;
    const meta = join(this.appsDir, `${key}.json`);
    if (!existsSync(meta) || !existsSync(join(this.appsDir, key))) return undefined;
    // The plan, with the base image beside it for an app built on one.
    const { base, ...plan } = JSON.parse(readFileSync(meta, 'utf8'));
    return { key, dir: join(this.appsDir, key), plan, ...(base ? { base } : {}), cached: true };
  }

  /**
   * Builds `sourceDigest` for `workspace` (whose dependency cache it uses) on `base` (none: the default image);
   * throws BuildError on failure.
   */
  async build(
    workspace: string,
    sourceDigest: string,
    signal: AbortSignal,
    base?: BaseImage,
  ): Promise<BuiltApp> {
    const done = this.built(sourceDigest, base);
    if (done) return done;
    const key = this.keyOf(sourceDigest, base);
    this.running.add(key);
    try {
      return await this.run(workspace, sourceDigest, key, signal, base);
    } finally {
      this.running.delete(key);
    }
  }

  private async run(
    workspace: string,
    sourceDigest: string,
    key: string,
    signal: AbortSignal,
    base: BaseImage | undefined,
  ): Promise<BuiltApp> {
    const log = this.logPath(key);
    writeFileSync(log, '');
    const say = (line: string) => appendFileSync(log, `${line}\n`);
    const work = join(this.workDir, key);
    rmSync(work, { recursive: true, force: true });
    const src = join(work, 'src');
    const out = join(work, 'app');
    const fail = (msg: string): never => {
      say(`berth: build failed: ${msg}`);
      throw new BuildError(msg, tailOf(readFileSync(log, 'utf8')));
    };
    if (base) say(`berth: building on image ${base.name} (${base.id})`);
    say(`berth: unpacking ${sourceDigest}`);
    try {
      await extractZip(this.deps.code.pathOf(sourceDigest), src);
    } catch (err) {
      if (err instanceof UnsafeArchiveError) fail(`the upload was refused: ${err.message}`);
      throw err;
    }
    makeReadable(src);
    let plan: BuildPlan;
    try {
      plan = planBuild(src);
    } catch (err) {
      if (err instanceof PlanError || err instanceof ManifestError) return fail(err.message);
      throw err;
    }
    mkdirSync(out, { recursive: true, mode: 0o755 });
    chmodSync(out, 0o755);
    // Per image too (apart from the default image's, never inside it): dependencies one image's node or python
    // installed (native modules) are not another's.
    const cache = base
      ? join(`${this.depsDir}-images`, base.id.slice('sha256:'.length), workspace)
      : join(this.depsDir, workspace);
    mkdirSync(cache, { recursive: true });
    const id = `bld-${key.slice(0, 24)}`;
    try {
      const info = await this.deps.driver.ensure(id, {
        memoryMb: BUILD_MEMORY_MB,
        pidsMax: 1024,
        cpuShares: defaultCpuShares(BUILD_MEMORY_MB),
        diskMb: BUILD_MEMORY_MB,
        envs: { HOME: '/home/user' },
        image: base?.id ?? BUILD_IMAGE,
        volumes: [
          { hostPath: src, mountPath: SRC_MOUNT, readOnly: true },
          { hostPath: out, mountPath: APP_MOUNT, readOnly: false },
          { hostPath: cache, mountPath: CACHE_MOUNT, readOnly: false },
        ],
      });
      await this.deps.waitHealthy(info.socketPath, signal);
      const result = await execStreamed(
        info.socketPath,
        {
          command: `sh -c ${shq(buildScript(plan))}`,
          workingDir: APP_MOUNT,
          timeout: BUILD_TIMEOUT_S,
          env: { HOME: '/home/user' },
        },
        (_stream, data) => appendFileSync(log, data),
        signal,
      );
      if (result.exitCode !== 0)
        fail(
          result.status === 'killed'
            ? `stopped after ${BUILD_TIMEOUT_S} s`
            : `the build exited with code ${result.exitCode}`,
        );
    } finally {
      await this.deps.driver.remove(id).catch(() => undefined);
    }
    const dir = join(this.appsDir, key);
    rmSync(dir, { recursive: true, force: true });
    renameSync(out, dir);
    // The plan file marks the app built (builtByKey): written whole or not at all, so a server killed here
    // builds again rather than reading half a file.
    writeFileSync(
      join(this.appsDir, `${key}.json.tmp`),
      JSON.stringify({ ...plan, ...(base ? { base } : {}) }),
    );
    renameSync(join(this.appsDir, `${key}.json.tmp`), join(this.appsDir, `${key}.json`));
    rmSync(work, { recursive: true, force: true });
    this.deps.logger?.info({ workspace, key }, 'build done');
    return { key, dir, plan, ...(base ? { base } : {}), cached: false };
  }
}
