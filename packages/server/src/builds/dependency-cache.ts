// The sealed dependency cache (decision 036). An entry is a node_modules (or a Python venv) installed by the
// package manager alone, in an install sandbox whose only inputs are the files the install needs (package.json
// without its scripts, the lockfile, .npmrc; or requirements.txt), and sealed by the server once that sandbox is
// gone: written whole under `<workspace>/deps/<image>/<kind>/<key>`, the key hashing every input and the runtime.
// A build mounts its one entry read-only and copies it; nothing a build runs (the project's install scripts, its
// build script) can write an entry, and an entry is only ever what installing its own inputs gave.
// Dependencies' own install scripts do run in the install step: the lockfile pins their code (by integrity), so
// they are part of what the key names, and native modules are built once per entry rather than on every build.
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { APP_MOUNT, installScript, NODE_MODULES, SRC_MOUNT, VENV } from './build-script.js';
import { workspaceBuildsDir } from './layout.js';
import type { BuildPlan } from './plan.js';
import {
  BUILD_ID_PREFIX,
  BUILD_IMAGE,
  type BuildOwner,
  runStep,
  type StepDeps,
  stepFailure,
} from './sandbox-step.js';

/** The files an install step is given, and the cache key they (with the runtime) make. */
export interface InstallInputs {
  kind: 'node' | 'python';
  /** What the entry holds: the directory the install makes at /app. */
  holds: typeof NODE_MODULES | typeof VENV;
  files: Record<string, Buffer>;
  key: string;
  /** For the log: which file pins the dependencies. */
  pinnedBy: string;
}

/** A stored image a build runs on; none: the default image. */
export interface CacheImage {
  id: string;
}

export class InstallError extends Error {
  override name = 'InstallError';
}

/**
 * The interpreter the default image (the host userland) runs, named in the key so that an upgrade of the host's
 * Node major or Python minor installs again instead of copying modules built for the old one. An image of the
 * store is content-addressed: its entries are kept apart by image id.
 */
function runtimeOf(kind: InstallInputs['kind']): string {
  if (kind === 'node') return `node${process.versions.node.split('.')[0]}`;
  try {
    return realpathSync('/usr/bin/python3');
  } catch {
    return 'python3';
  }
}

const hashFiles = (files: Record<string, Buffer>, ...parts: string[]) => {
  const h = createHash('sha256');
  for (const name of Object.keys(files).sort())
    h.update(`${name}\0${files[name].length}\0`).update(files[name]);
  return h.update(parts.join('\0')).digest('hex').slice(0, 32);
};

/**
 * What the install step of a plan takes from the unpacked source `dir`; undefined when its dependencies cannot be
 * cached (vendored, none, no lockfile, or naming files of the project: the build step installs them).
 */
export function installInputs(plan: BuildPlan, dir: string): InstallInputs | undefined {
  const file = (name: string) => readFileSync(join(dir, name));
  const optional = (names: string[]) =>
    Object.fromEntries(names.filter((n) => existsSync(join(dir, n))).map((n) => [n, file(n)]));
  let kind: InstallInputs['kind'];
  let files: Record<string, Buffer>;
  let pinnedBy: string;
  if (plan.language === 'node') {
    const d = plan.deps;
    if (d.vendored || !d.any || !d.sealable || !d.lockfile) return undefined;
    // The root package's scripts are the project's code: the install step runs without them (npm ci would run
    // its preinstall, postinstall, prepare...), the build step runs them over the copied entry.
    const { scripts: _scripts, ...pkg } = JSON.parse(file('package.json').toString('utf8'));
    kind = 'node';
    pinnedBy = d.lockfile;
    files = {
      'package.json': Buffer.from(JSON.stringify(pkg, null, 2)),
      [d.lockfile]: file(d.lockfile),
      ...optional(d.lockfile === 'yarn.lock' ? ['.npmrc', '.yarnrc'] : ['.npmrc']),
    };
  } else {
    if (!plan.requirements || !plan.sealable) return undefined;
    kind = 'python';
    pinnedBy = 'requirements.txt';
    files = { 'requirements.txt': file('requirements.txt') };
  }
  const holds = kind === 'node' ? NODE_MODULES : VENV;
  return { kind, holds, files, pinnedBy, key: hashFiles(files, kind, runtimeOf(kind), process.arch) };
}

/**
 * Where the entry of `inputs` is (or would be) in `workspace`, for builds on `image` (none: the default image):
 * per image too, since what one image's node or python installed (native modules, a venv) is not another's.
 */
export function entryDirOf(
  dataDir: string,
  workspace: string,
  inputs: InstallInputs,
  image?: CacheImage,
): string {
  const on = image ? image.id.slice('sha256:'.length) : 'default';
  return join(workspaceBuildsDir(dataDir, workspace), 'deps', on, inputs.kind, inputs.key);
}

export class DependencyCache {
  /** Installs under way in this process, by entry path: two builds of one lockfile install it once. */
  private readonly installing = new Map<string, Promise<void>>();

  constructor(private readonly deps: StepDeps & { dataDir: string }) {}

  /**
   * The sealed entry of `inputs` in `workspace`, made by an install step first when missing; `say` writes the build
   * log's own lines, `output` the installer's. Throws InstallError when the install fails.
   */
  async entry(
    workspace: string,
    inputs: InstallInputs,
    image: CacheImage | undefined,
    log: { say: (line: string) => void; output: (data: string) => void },
    signal: AbortSignal,
    owner: BuildOwner,
  ): Promise<string> {
    const dir = entryDirOf(this.deps.dataDir, workspace, inputs, image);
    const what = `${inputs.pinnedBy} ${inputs.key}`;
    if (existsSync(dir)) {
      log.say(`dependency cache hit (${what}): installing nothing`);
      return dir;
    }
    let running = this.installing.get(dir);
    log.say(
      `dependency cache miss (${what}): installing from ${Object.keys(inputs.files).join(', ')} alone in an install sandbox`,
    );
    if (!running) {
      running = this.install(workspace, dir, inputs, image, log.output, signal, owner).finally(() =>
        this.installing.delete(dir),
      );
      this.installing.set(dir, running);
    }
    await running;
    return dir;
  }

  private async install(
    workspace: string,
    dir: string,
    inputs: InstallInputs,
    image: CacheImage | undefined,
    output: (data: string) => void,
    signal: AbortSignal,
    owner: BuildOwner,
  ): Promise<void> {
    const work = join(
      workspaceBuildsDir(this.deps.dataDir, workspace),
      'work',
      `install-${randomBytes(8).toString('hex')}`,
    );
    const src = join(work, 'src');
    const out = join(work, 'app');
    try {
      for (const d of [src, out]) {
        mkdirSync(d, { recursive: true, mode: 0o755 });
        chmodSync(d, 0o755);
      }
      for (const [name, bytes] of Object.entries(inputs.files))
        writeFileSync(join(src, name), bytes, { mode: 0o644 });
      const result = await runStep(this.deps, {
        id: `${BUILD_ID_PREFIX}i${createHash('sha256').update(`${workspace}\0${dir}`).digest('hex').slice(0, 23)}`,
        workspace,
        owner,
        image: image?.id ?? BUILD_IMAGE,
        volumes: [
          { hostPath: src, mountPath: SRC_MOUNT, readOnly: true },
          { hostPath: out, mountPath: APP_MOUNT, readOnly: false },
        ],
        script: installScript(inputs.kind, inputs.pinnedBy),
        onOutput: output,
        signal,
      });
      if (result.exitCode !== 0) throw new InstallError(stepFailure('the dependency install', result));
      // The install sandbox is gone (runStep removed it): nothing writes `out` any more. The entry appears whole, by
      // one rename, or not at all; an install that made nothing (no dependency to place) is an empty entry.
      const sealing = join(work, 'entry');
      mkdirSync(sealing, { mode: 0o755 });
      chmodSync(sealing, 0o755);
      if (existsSync(join(out, inputs.holds)))
        renameSync(join(out, inputs.holds), join(sealing, inputs.holds));
      mkdirSync(join(dir, '..'), { recursive: true });
      if (!existsSync(dir)) renameSync(sealing, dir);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
}
