// What a build does with a source tree, decided on the server from a few files (reading them builds nothing):
// the language, how dependencies are installed, whether a build script runs, and the start command, resolved
// here once and stored in the revision (never guessed when a replica starts). No start command = build error.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MANIFEST_FILES, type Manifest, parseManifest } from './manifest.js';

export interface NodeDeps {
  /** node_modules came with the upload: nothing to install. */
  vendored: boolean;
  /** Which lockfile pins them (npm's is the one an offline install can use). */
  lockfile?: 'package-lock.json' | 'npm-shrinkwrap.json' | 'pnpm-lock.yaml' | 'yarn.lock';
  /** The dependency cache key: sha256 of the lockfile, the Node major and the architecture. */
  cacheKey?: string;
  /** package.json declares any dependency at all. */
  any: boolean;
}

export type BuildPlan =
  | { language: 'node'; deps: NodeDeps; buildScript: boolean; start: string; manifest?: Manifest }
  | { language: 'python'; requirements: boolean; cacheKey?: string; start: string; manifest?: Manifest };

export class PlanError extends Error {
  override name = 'PlanError';
}

const read = (dir: string, f: string) => readFileSync(join(dir, f), 'utf8');

function manifestOf(dir: string): Manifest | undefined {
  for (const f of MANIFEST_FILES) if (existsSync(join(dir, f))) return parseManifest(f, read(dir, f));
  return undefined;
}

/** `web:` of a Procfile, the convention of Heroku and the buildpacks. */
function procfileWeb(dir: string): string | undefined {
  if (!existsSync(join(dir, 'Procfile'))) return undefined;
  const line = read(dir, 'Procfile')
    .split('\n')
    .find((l) => /^web\s*:/.test(l));
  return line?.replace(/^web\s*:\s*/, '').trim() || undefined;
}

const firstExisting = (dir: string, files: string[]) => files.find((f) => existsSync(join(dir, f)));

const NODE_ENTRY_FILES = ['index.js', 'server.js', 'app.js'].flatMap((f) => [`dist/${f}`, f, `src/${f}`]);
const PYTHON_ENTRY_FILES = ['main.py', 'app.py', 'server.py'].flatMap((f) => [f, `src/${f}`, `app/${f}`]);

export const cacheKeyOf = (bytes: Buffer | string, ...parts: string[]) =>
  createHash('sha256')
    .update(bytes)
    .update(`\0${parts.join('\0')}`)
    .digest('hex')
    .slice(0, 32);

function nodePlan(dir: string, manifest: Manifest | undefined): BuildPlan {
  let pkg: any;
  try {
    pkg = JSON.parse(read(dir, 'package.json'));
  } catch (err) {
    throw new PlanError(`package.json is not valid JSON: ${(err as Error).message}`);
  }
  const scripts: Record<string, string> = pkg.scripts ?? {};
  const buildScript = typeof scripts.build === 'string';
  const lockfile = firstExisting(dir, [
    'package-lock.json',
    'npm-shrinkwrap.json',
    'pnpm-lock.yaml',
    'yarn.lock',
  ]) as NodeDeps['lockfile'];
  const any = Object.keys(pkg.dependencies ?? {}).length + Object.keys(pkg.devDependencies ?? {}).length > 0;
  const deps: NodeDeps = {
    vendored: existsSync(join(dir, 'node_modules')),
    lockfile,
    any,
    cacheKey: lockfile
      ? cacheKeyOf(readFileSync(join(dir, lockfile)), process.versions.node.split('.')[0], process.arch)
      : undefined,
  };
  // After a build script, files it writes (dist/) count even though they are not in the upload yet.
  const entry =
    (buildScript && typeof pkg.main === 'string' ? pkg.main : undefined) ??
    firstExisting(dir, typeof pkg.main === 'string' ? [pkg.main, ...NODE_ENTRY_FILES] : NODE_ENTRY_FILES) ??
    (buildScript ? 'dist/index.js' : undefined);
  const start =
    manifest?.prod ??
    procfileWeb(dir) ??
    scripts.prod ??
    scripts.start ??
    (entry ? `node ${entry}` : undefined);
  if (!start)
    throw new PlanError(
      'no start command: add [entrypoint] prod = "<command>" to berth.toml, a "start" script to package.json, ' +
        'or an index.js / server.js / app.js',
    );
  return { language: 'node', deps, buildScript, start, manifest };
}

function pythonPlan(dir: string, manifest: Manifest | undefined): BuildPlan {
  const reqFile = existsSync(join(dir, 'requirements.txt')) ? read(dir, 'requirements.txt') : '';
  const requirements = reqFile.split('\n').some((l) => l.trim() && !l.trim().startsWith('#'));
  const entry = firstExisting(dir, PYTHON_ENTRY_FILES);
  const start = manifest?.prod ?? procfileWeb(dir) ?? (entry ? `python3 ${entry}` : undefined);
  if (!start)
    throw new PlanError(
      'no start command: add [entrypoint] prod = "<command>" to berth.toml, a Procfile "web:" line, or a main.py',
    );
  return {
    language: 'python',
    requirements,
    cacheKey: requirements ? cacheKeyOf(reqFile, process.arch) : undefined,
    start,
    manifest,
  };
}

/** Detects the plan of an unpacked source tree; throws PlanError (or ManifestError) with an actionable message. */
export function planBuild(dir: string): BuildPlan {
  const manifest = manifestOf(dir);
  if (existsSync(join(dir, 'package.json'))) return nodePlan(dir, manifest);
  if (
    existsSync(join(dir, 'requirements.txt')) ||
    existsSync(join(dir, 'pyproject.toml')) ||
    firstExisting(dir, PYTHON_ENTRY_FILES)
  )
    return pythonPlan(dir, manifest);
  if (manifest?.prod) return { language: 'python', requirements: false, start: manifest.prod, manifest };
  throw new PlanError(
    'nothing to build: the upload has no package.json (Node), requirements.txt / pyproject.toml / main.py ' +
      '(Python), nor a berth.toml with [entrypoint] prod',
  );
}
