// One build: a workspace's uploaded source (by digest) → an app directory `<workspace>/apps/<key>` (layout.ts), made
// in sandboxes (never on the host). The key hashes the workspace, the source digest and the base image, and every
// lookup takes the workspace: the same code builds once per workspace, and no key reaches another workspace's app
// (decision 036). The build log is kept per key (`<workspace>/logs/<key>.log`) and read while it grows.
//
// Two steps: dependencies come from the workspace's sealed cache, installed on a miss by the install step from the
// manifest and lockfile alone (dependency-cache.ts); the build step then copies them, runs the project's own
// install and build scripts with the source read-only at /src and the output at /app, and can write no cache entry.
//
// The base image (decision 035): the default image (the host userland), or `spec.runtime.image` naming an image the
// workspace holds in the image store. Both steps run on that image, so its own node/python/npm/pip install and
// build the app; the app directory is then bound at /app of replicas running the same image. The key hashes the
// image id too: the same source on another image (or on a re-imported name) is another build.
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
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { isDefaultImage } from '../kinds/image-reference.js';
import type { Outbound } from '../outbound/index.js';
import { ImageError } from '../runtime/images/errors.js';
import type { HeldImage, ImageStore, StoredImage } from '../runtime/images/image-store.js';
import type { Instances } from '../runtime/instances.js';
import { APP_MOUNT, buildScript, CACHE_MOUNT, SRC_MOUNT } from './build-script.js';
import type { CodeStore } from './code-store.js';
import { DependencyCache, InstallError, installInputs } from './dependency-cache.js';
import { fetchGitSource, type GitRepository, type GitSourceInfo } from './git-source.js';
import { appArchiveDigest } from './app-archive.js';
import { appsDirOf, workspaceBuildsDir, workspacesRoot } from './layout.js';
import { MANIFEST_FILES, type Manifest, ManifestError, parseManifest } from './manifest.js';
import { type BuildPlan, PlanError, planBuild } from './plan.js';
import { DockerfileError } from './dockerfile/parse.js';
import { ImageBuildError } from './dockerfile/engine.js';
import {
  buildWorkloadImage,
  builtImageName,
  type DockerfilePlan,
  hasDockerfile,
  startOf,
} from './dockerfile/workload.js';
import { BUILD_ID_PREFIX, BUILD_IMAGE, type BuildOwner, runStep, stepFailure } from './sandbox-step.js';
import { extractZip, UnsafeArchiveError } from './zip-extract.js';

/**
 * Bumped when the build steps change, so an app built by older steps is not reused. 2: keys name the workspace and
 * dependencies come from the sealed cache (decision 036).
 */
const BUILDER_VERSION = '2';
/** Lines of the build log an event of a failed build carries. */
export const FAILED_LOG_LINES = 20;

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
  /** The app directory bound at /app of replicas; '' for an app built from a Dockerfile (the image is the app). */
  dir: string;
  plan: BuildPlan | DockerfilePlan;
  /** The image it was built on; none: the default image. */
  base?: BaseImage;
  /** Built earlier: nothing ran. */
  cached: boolean;
  /**
   * The digest of the app directory's archive (app-archive.ts), taken when it was built: what a copy on another node
   * is checked against (decision 094). For a Dockerfile app, its image's id (the image is the app, and its id is the
   * digest of its content). None for an app built before either was recorded.
   */
  archive?: string;
  /** Copied from this peer (host:port) instead of built here. */
  copiedFrom?: string;
}

/**
 * Where an app this server lacks may be had without building it: another node of the cluster that holds it
 * (app-copies.ts). Undefined when no live node holds it; throws when holders failed to give it whole.
 */
export interface AppSource {
  copy(
    workspace: string,
    key: string,
    want: { digest?: string },
    signal: AbortSignal,
  ): Promise<BuiltApp | undefined>;
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
  /** Where build steps run (each an instance owned by the object built). */
  instances: Instances;
  code: CodeStore;
  logger?: Logger;
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

/** A build under way, so that deleting its workspace stops it and waits for it before removing the files. */
interface Running {
  stop: AbortController;
  done: Promise<unknown>;
  /** The build itself: a second build of the same key waits for it rather than starting over its work dir. */
  result: Promise<BuiltApp>;
}

export class Builder {
  /** Scratch of git clones (git-source.ts), removed after each. */
  private readonly workDir: string;
  private readonly cache: DependencyCache;
  /** Builds under way in this process by workspace, then key: a followed log ends when its key leaves. */
  private readonly running = new Map<string, Map<string, Running>>();
  /** In a cluster: the other nodes' built apps, copied rather than built again (decision 094). */
  private copies?: AppSource;

  constructor(private readonly deps: BuilderDeps) {
    this.workDir = join(deps.dataDir, 'builds', 'work');
    this.cache = new DependencyCache(deps);
    mkdirSync(this.workDir, { recursive: true });
    // Clones and builds left by a server killed mid-way: nothing clones or builds before this constructor returns.
    for (const e of readdirSync(this.workDir))
      rmSync(join(this.workDir, e), { recursive: true, force: true });
    const root = workspacesRoot(deps.dataDir);
    if (existsSync(root))
      for (const ws of readdirSync(root)) rmSync(join(root, ws, 'work'), { recursive: true, force: true });
  }

  /** Builds from here on copy an app another node holds before building it (main/http.ts sets it in a cluster). */
  copyFrom(copies: AppSource | undefined): void {
    this.copies = copies;
  }

  /** Clones a spec's git repository into the workspace's code, as an upload would store it (git-source.ts). */
  fetchGit(workspace: string, repo: GitRepository, signal: AbortSignal): Promise<GitSourceInfo> {
    const { code, gitAllowLocal, outbound } = this.deps;
    return fetchGitSource(repo, {
      code,
      workspace,
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
    this.deps.images?.markDeployed(workspace, image.id);
    const path = image.config.env.find((e) => e.startsWith('PATH='))?.slice('PATH='.length);
    return { name: name as string, id: image.id, ...(path ? { path } : {}) };
  }

  /** The build key of a workspace's source on a base image (none: the default image): its app directory's name. */
  keyOf(workspace: string, sourceDigest: string, base?: BaseImage): string {
    const input = [BUILDER_VERSION, workspace, sourceDigest, base?.id ?? ''].join('\0');
    return createHash('sha256').update(input).digest('hex').slice(0, 32);
  }

  private appsDir(workspace: string): string {
    return appsDirOf(this.deps.dataDir, workspace);
  }

  logPath(workspace: string, key: string): string {
    if (!KEY.test(key)) throw new Error(`not a build key: ${key}`);
    return join(workspaceBuildsDir(this.deps.dataDir, workspace), 'logs', `${key}.log`);
  }

  hasLog(workspace: string, key: string): boolean {
    return KEY.test(key) && existsSync(this.logPath(workspace, key));
  }

  readLog(workspace: string, key: string): string | undefined {
    return this.hasLog(workspace, key) ? readFileSync(this.logPath(workspace, key), 'utf8') : undefined;
  }

  /** Whether the build of `key` in `workspace` runs now (its log may still grow). */
  isBuilding(workspace: string, key: string): boolean {
    return this.running.get(workspace)?.has(key) === true;
  }

  /** The app built from this source of the workspace on this base image earlier, if any. */
  built(workspace: string, sourceDigest: string, base?: BaseImage): BuiltApp | undefined {
    return this.builtByKey(workspace, this.keyOf(workspace, sourceDigest, base));
  }

  /**
   * A built app of the workspace by its key (a revision names it so): rollbacks and job tasks run it again without
   * a build. Another workspace's key finds nothing: apps are looked up in the workspace's own directory only.
   */
  builtByKey(workspace: string, key: string): BuiltApp | undefined {
    if (!KEY.test(key)) return undefined;
    const apps = this.appsDir(workspace);
    const meta = join(apps, `${key}.json`);
    if (!existsSync(meta) || !existsSync(join(apps, key))) return undefined;
    // The plan, with the base image beside it for an app built on one.
    const { base, archive, ...plan } = JSON.parse(readFileSync(meta, 'utf8'));
    const dir = plan.language === 'dockerfile' ? '' : join(apps, key);
    return { key, dir, plan, ...(base ? { base } : {}), ...(archive ? { archive } : {}), cached: true };
  }

  /**
   * Builds `sourceDigest` of `workspace` (with the workspace's dependency cache) on `base` (none: the default image)
   * for `owner` (the object built, which owns its steps' instances); throws BuildError on failure. In a cluster the
   * app is first asked of the other nodes (`copyFrom`): copied from one that holds it, checked against `want.digest`
   * (a revision's recorded archive digest) when given, and built here only when no live node holds it.
   */
  async build(
    workspace: string,
    sourceDigest: string,
    signal: AbortSignal,
    base: BaseImage | undefined,
    owner: BuildOwner,
    want: { digest?: string } = {},
  ): Promise<BuiltApp> {
    const done = this.built(workspace, sourceDigest, base);
    if (done) {
      // Used again: young for the collection of apps no revision keeps (its revision may not be written yet).
      const now = new Date();
      utimesSync(join(this.appsDir(workspace), `${done.key}.json`), now, now);
      return done;
    }
    const key = this.keyOf(workspace, sourceDigest, base);
    // Two objects of a workspace with the same source (two users' copies of one MCP server, deployed at once) share
    // one build: a second run would empty the work directory under the first.
    const under = this.running.get(workspace)?.get(key);
    if (under) return under.result;
    const stop = new AbortController();
    const both = AbortSignal.any([signal, stop.signal]);
    const building = this.copyOrRun(workspace, sourceDigest, key, both, base, owner, want);
    const mine = this.running.get(workspace) ?? new Map<string, Running>();
    this.running.set(workspace, mine);
    mine.set(key, { stop, done: building.catch(() => undefined), result: building });
    try {
      return await building;
    } finally {
      mine.delete(key);
      if (mine.size === 0 && this.running.get(workspace) === mine) this.running.delete(workspace);
    }
  }

  /**
   * Deletes everything builds keep for a deleted workspace: sources, apps, logs, dependency cache. Its builds under
   * way are stopped first and awaited, so none writes into a directory a new workspace of the same name would get.
   */
  async removeWorkspace(workspace: string): Promise<void> {
    const mine = this.running.get(workspace);
    if (mine) {
      for (const r of mine.values()) r.stop.abort(new Error(`workspace ${workspace} was deleted`));
      await Promise.all([...mine.values()].map((r) => r.done));
    }
    rmSync(workspaceBuildsDir(this.deps.dataDir, workspace), { recursive: true, force: true });
  }

  /**
   * Removes the built apps of `workspace` that `wanted` does not name (the apps of the revisions its objects keep, and
   * of its unfinished job executions) and that were built more than `olderThanMs` ago (a build whose revision is not
   * written yet is younger), never one being built: the app directory, its plan and its log; an app built from a
   * Dockerfile lets go of its image's name (`release`, refused while a sandbox runs it: then it stays for the next
   * pass). Returns the keys removed.
   */
  collectApps(
    workspace: string,
    wanted: ReadonlySet<string>,
    olderThanMs: number,
    release?: (name: string) => void,
  ): string[] {
    const apps = this.appsDir(workspace);
    if (!existsSync(apps)) return [];
    const building = this.running.get(workspace);
    const removed: string[] = [];
    for (const f of readdirSync(apps)) {
      const key = f.endsWith('.json') ? f.slice(0, -'.json'.length) : undefined;
      if (!key || !KEY.test(key) || wanted.has(key) || building?.has(key)) continue;
      const plan = join(apps, f);
      if (Date.now() - statSync(plan).mtimeMs < olderThanMs) continue;
      if (this.builtByKey(workspace, key)?.plan.language === 'dockerfile' && release) {
        try {
          release(builtImageName(key));
        } catch {
          continue; // its image runs in a sandbox, or was let go of already: the next pass looks again
        }
      }
      // The plan first: without it the app is not built (builtByKey), so nothing starts on a directory going away.
      rmSync(plan, { force: true });
      rmSync(join(apps, key), { recursive: true, force: true });
      rmSync(this.logPath(workspace, key), { force: true });
      removed.push(key);
    }
    return removed;
  }

  /** Removes what builds kept for workspaces that no longer exist (a server stopped before it could). */
  async removeWorkspacesExcept(existing: Set<string>): Promise<string[]> {
    const root = workspacesRoot(this.deps.dataDir);
    const gone = existsSync(root) ? readdirSync(root).filter((ws) => !existing.has(ws)) : [];
    for (const ws of gone) rmSync(join(root, ws), { recursive: true, force: true });
    return gone;
  }

  /**
   * The hook of decision 051: an upload with a Dockerfile at its root is built by the Dockerfile engine into an image
   * of the workspace, which replicas and tasks run as it is (no /app bound over it); its ENTRYPOINT and CMD are the
   * start command unless berth.toml says one. `spec.runtime.image` is not used: the Dockerfile's FROM is the base.
   */
  private async fromDockerfile(
    workspace: string,
    owner: BuildOwner,
    key: string,
    src: string,
    say: (line: string) => void,
    output: (data: string) => void,
    fail: (msg: string) => never,
    signal: AbortSignal,
  ): Promise<BuiltApp> {
    const { images, instances, dataDir } = this.deps;
    if (!images) return fail('a Dockerfile build needs the image store');
    say('building the Dockerfile at the root of the upload');
    let image: HeldImage;
    try {
      image = await buildWorkloadImage(
        { images, instances, dataDir },
        { workspace, key, src, log: output, owner },
        signal,
      );
    } catch (err) {
      if (err instanceof ImageBuildError || err instanceof DockerfileError || err instanceof ImageError)
        return fail(err.message);
      throw err;
    }
    let manifest: ReturnType<typeof parseManifestOf>;
    try {
      manifest = parseManifestOf(src);
    } catch (err) {
      if (err instanceof ManifestError) return fail(err.message);
      throw err;
    }
    const start = startOf(image, manifest);
    if (!start)
      return fail(
        'the image has no ENTRYPOINT or CMD: add one, or [entrypoint] prod = "<command>" to berth.toml',
      );
    const plan: DockerfilePlan = { language: 'dockerfile', start, ...(manifest ? { manifest } : {}) };
    const path = image.config.env.find((e) => e.startsWith('PATH='))?.slice('PATH='.length);
    const base: BaseImage = {
      name: image.references[0] ?? image.id,
      id: image.id,
      ...(path ? { path } : {}),
    };
    const apps = this.appsDir(workspace);
    mkdirSync(join(apps, key), { recursive: true });
    // Its image's id is its digest: another node copies the image (content-checked) rather than build it again.
    writeFileSync(join(apps, `${key}.json.tmp`), JSON.stringify({ ...plan, base, archive: image.id }));
    renameSync(join(apps, `${key}.json.tmp`), join(apps, `${key}.json`));
    say(`image ${base.name} (${image.id}); start command: ${start}`);
    return { key, dir: '', plan, base, archive: image.id, cached: false };
  }

  private async copyOrRun(
    workspace: string,
    sourceDigest: string,
    key: string,
    signal: AbortSignal,
    base: BaseImage | undefined,
    owner: BuildOwner,
    want: { digest?: string },
  ): Promise<BuiltApp> {
    const copied = await this.copies?.copy(workspace, key, want, signal);
    if (copied) return copied;
    return this.run(workspace, sourceDigest, key, signal, base, owner);
  }

  private async run(
    workspace: string,
    sourceDigest: string,
    key: string,
    signal: AbortSignal,
    base: BaseImage | undefined,
    owner: BuildOwner,
  ): Promise<BuiltApp> {
    const root = workspaceBuildsDir(this.deps.dataDir, workspace);
    const apps = this.appsDir(workspace);
    const log = this.logPath(workspace, key);
    for (const d of [apps, join(root, 'logs'), join(root, 'work')]) mkdirSync(d, { recursive: true });
    writeFileSync(log, '');
    // Called from the install and build steps' output streams too: a line that cannot be written (the workspace was
    // deleted under a build being stopped) is dropped, never thrown where no one catches it.
    const write = (text: string) => {
      try {
        appendFileSync(log, text);
      } catch {
        // The log is gone with its workspace.
      }
    };
    const say = (line: string) => write(`berth: ${line}\n`);
    const output = (data: string) => write(data);
    const work = join(root, 'work', key);
    rmSync(work, { recursive: true, force: true });
    const src = join(work, 'src');
    const out = join(work, 'app');
    const fail = (msg: string): never => {
      say(`build failed: ${msg}`);
      throw new BuildError(msg, tailOf(readFileSync(log, 'utf8')));
    };
    try {
      if (base) say(`building on image ${base.name} (${base.id})`);
      say(`unpacking ${sourceDigest}`);
      try {
        await extractZip(this.deps.code.pathOf(workspace, sourceDigest), src);
      } catch (err) {
        if (err instanceof UnsafeArchiveError) fail(`the upload was refused: ${err.message}`);
        throw err;
      }
      makeReadable(src);
      if (hasDockerfile(src))
        return await this.fromDockerfile(workspace, owner, key, src, say, output, fail, signal);
      let plan: BuildPlan;
      try {
        plan = planBuild(src);
      } catch (err) {
        if (err instanceof PlanError || err instanceof ManifestError) return fail(err.message);
        throw err;
      }
      const inputs = installInputs(plan, src);
      let entry: string | undefined;
      if (inputs)
        try {
          entry = await this.cache.entry(workspace, inputs, base, { say, output }, signal, owner);
        } catch (err) {
          if (err instanceof InstallError) fail(err.message);
          throw err;
        }
      mkdirSync(out, { recursive: true, mode: 0o755 });
      chmodSync(out, 0o755);
      const result = await runStep(this.deps, {
        id: `${BUILD_ID_PREFIX}${key.slice(0, 24)}`,
        workspace,
        owner,
        image: base?.id ?? BUILD_IMAGE,
        volumes: [
          { hostPath: src, mountPath: SRC_MOUNT, readOnly: true },
          { hostPath: out, mountPath: APP_MOUNT, readOnly: false },
          ...(entry ? [{ hostPath: entry, mountPath: CACHE_MOUNT, readOnly: true }] : []),
        ],
        script: buildScript(plan, entry !== undefined),
        onOutput: output,
        signal,
      });
      if (result.exitCode !== 0) fail(stepFailure('the build', result));
      // Stopped meanwhile (its workspace deleted): nothing is kept.
      signal.throwIfAborted();
      const dir = join(apps, key);
      rmSync(dir, { recursive: true, force: true });
      renameSync(out, dir);
      // Taken now, from the files the build made: another node's copy must hash to it (decision 094).
      const { digest: archive } = await appArchiveDigest(dir);
      // The plan file marks the app built (builtByKey): written whole or not at all, so a server killed here
      // builds again rather than reading half a file.
      writeFileSync(
        join(apps, `${key}.json.tmp`),
        JSON.stringify({ ...plan, ...(base ? { base } : {}), archive }),
      );
      renameSync(join(apps, `${key}.json.tmp`), join(apps, `${key}.json`));
      say(`built; archive ${archive}`);
      this.deps.logger?.info({ workspace, key, archive }, 'build done');
      return { key, dir, plan, ...(base ? { base } : {}), archive, cached: false };
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
}

/** A build key (keyOf): 32 hex. */
export const KEY = /^[0-9a-f]{32}$/;

/** berth.toml (or blaxel.toml) of an unpacked upload, if it has one. */
function parseManifestOf(dir: string): Manifest | undefined {
  for (const f of MANIFEST_FILES)
    if (existsSync(join(dir, f))) return parseManifest(f, readFileSync(join(dir, f), 'utf8'));
  return undefined;
}
