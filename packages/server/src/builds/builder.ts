// One build: an uploaded source (by digest) → a content-addressed app directory `<dataDir>/builds/apps/<key>`,
// made inside a build sandbox (never on the host): the source bound read-only at /src, the output at /app, the
// workspace's dependency cache at /cache. The key hashes the source digest and the plan, so the same code builds
// once. The build log is kept per key (`builds/logs/<key>.log`) and read while it grows.
//
// Seam for the image store: today a replica runs the default image with the app directory bound read-only at
// /app. With images, `finish()` becomes "the app directory as one extra layer on the base image" and the key
// becomes that image's digest; replicas then name the image instead of binding the directory.
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
import { defaultCpuShares, type RuntimeDriver } from '../runtime/driver.js';
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
/** The image builds run on: the host userland (see the seam above). */
export const BUILD_IMAGE = 'blaxel/base-image:latest';

export interface BuiltApp {
  key: string;
  dir: string;
  plan: BuildPlan;
  /** Built earlier: nothing ran. */
  cached: boolean;
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
  /** Local paths, file:// and private hosts may be cloned (BERTH_GIT_ALLOW_LOCAL; see git-source.ts). */
  gitAllowLocal?: boolean;
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
    const { code, gitAllowLocal } = this.deps;
    return fetchGitSource(repo, { code, workDir: this.workDir, allowLocal: gitAllowLocal === true, signal });
  }

  /** The build key of a source: the app directory's name once built, and its log's. */
  keyOf(sourceDigest: string): string {
    return createHash('sha256').update(`${BUILDER_VERSION}\0${sourceDigest}`).digest('hex').slice(0, 32);
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

  /** The app built from this source earlier, if any. */
  built(sourceDigest: string): BuiltApp | undefined {
    return this.builtByKey(this.keyOf(sourceDigest));
  }

  /** A built app by its key (a revision names it so): rollbacks run it again without a build. */
  builtByKey(key: string): BuiltApp | undefined {
    if (!/^[0-9a-f]{32}$/.test(key)) return undefined;
    const meta = join(this.appsDir, `${key}.json`);
    if (!existsSync(meta) || !existsSync(join(this.appsDir, key))) return undefined;
    return { key, dir: join(this.appsDir, key), plan: JSON.parse(readFileSync(meta, 'utf8')), cached: true };
  }

  /** Builds `sourceDigest` for `workspace` (whose dependency cache it uses); throws BuildError on failure. */
  async build(workspace: string, sourceDigest: string, signal: AbortSignal): Promise<BuiltApp> {
    const done = this.built(sourceDigest);
    if (done) return done;
    const key = this.keyOf(sourceDigest);
    this.running.add(key);
    try {
      return await this.run(workspace, sourceDigest, key, signal);
    } finally {
      this.running.delete(key);
    }
  }

  private async run(
    workspace: string,
    sourceDigest: string,
    key: string,
    signal: AbortSignal,
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
    const cache = join(this.depsDir, workspace);
    mkdirSync(cache, { recursive: true });
    const id = `bld-${key.slice(0, 24)}`;
    try {
      const info = await this.deps.driver.ensure(id, {
        memoryMb: BUILD_MEMORY_MB,
        pidsMax: 1024,
        cpuShares: defaultCpuShares(BUILD_MEMORY_MB),
        diskMb: BUILD_MEMORY_MB,
        envs: { HOME: '/home/user' },
        image: BUILD_IMAGE,
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
    writeFileSync(join(this.appsDir, `${key}.json.tmp`), JSON.stringify(plan));
    renameSync(join(this.appsDir, `${key}.json.tmp`), join(this.appsDir, `${key}.json`));
    rmSync(work, { recursive: true, force: true });
    this.deps.logger?.info({ workspace, key }, 'build done');
    return { key, dir, plan, cached: false };
  }
}
