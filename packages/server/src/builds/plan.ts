// What a build does with a source tree, decided on the server from a few files (reading them builds nothing):
// the language, how dependencies are installed, whether a build script runs, and the start command, resolved
// here once and stored in the revision (never guessed when a replica starts). No start command = build error.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MANIFEST_FILES, type Manifest, parseManifest } from './manifest.js';

export interface NodeDeps {
  /** node_modules came with the upload: nothing to install. */
  vendored: boolean;
  /** Which lockfile pins them (npm's is the one an offline install can use). */
  lockfile?: 'package-lock.json' | 'npm-shrinkwrap.json' | 'pnpm-lock.yaml' | 'yarn.lock';
  /**
   * The dependencies install from package.json and the lockfile alone (nothing names a local path, a link or a
   * workspace), so the install step can make them into the workspace's sealed cache (dependency-cache.ts).
   */
  sealable: boolean;
  /**
   * The root package's own install lifecycle scripts, in the order npm ci runs them: user code, so they run in the
   * build step over the copied dependencies, never in the install step.
   */
  rootScripts: string[];
  /** package.json declares any dependency at all. */
  any: boolean;
}

export type BuildPlan =
  | { language: 'node'; deps: NodeDeps; buildScript: boolean; start: string; manifest?: Manifest }
  | {
      language: 'python';
      requirements: boolean;
      /** requirements.txt names no local path nor other file: the install step can make it into the cache. */
      sealable: boolean;
      start: string;
      manifest?: Manifest;
    };

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

/** What npm ci runs of the root package after installing its dependencies, in this order. */
const ROOT_INSTALL_SCRIPTS = [
  'preinstall',
  'install',
  'postinstall',
  'prepublish',
  'preprepare',
  'prepare',
  'postprepare',
];
const DEPENDENCY_FIELDS = ['dependencies', 'devDependencies', 'optionalDependencies', 'peerDependencies'];
/** A dependency spec that points into the project (or next to it) rather than at a registry or a repository. */
const LOCAL_SPEC = /^(file:|link:|workspace:|portal:|\.{0,2}\/|~\/)|^[^:]*\.(tgz|tar\.gz|tar)$/i;

/** Strings anywhere in a value (overrides nest). */
const stringsOf = (v: unknown): string[] =>
  typeof v === 'string' ? [v] : v && typeof v === 'object' ? Object.values(v).flatMap(stringsOf) : [];

/** The project names files of its own as dependencies: they are not in the install step's inputs. */
function nodeLocalRefs(dir: string, pkg: any, lockfile: NodeDeps['lockfile']): boolean {
  if (pkg.workspaces !== undefined || existsSync(join(dir, 'pnpm-workspace.yaml'))) return true;
  const specs = [...DEPENDENCY_FIELDS.map((f) => pkg[f]), pkg.overrides, pkg.resolutions].flatMap(stringsOf);
  if (specs.some((s) => LOCAL_SPEC.test(s))) return true;
  if (lockfile !== 'package-lock.json' && lockfile !== 'npm-shrinkwrap.json') return false;
  try {
    const lock = JSON.parse(read(dir, lockfile));
    return Object.values<any>(lock.packages ?? {}).some(
      (p) => p?.link === true || (typeof p?.resolved === 'string' && p.resolved.startsWith('file:')),
    );
  } catch {
    return false; // npm ci reports a broken lockfile itself
  }
}

/**
 * A requirements.txt line that reaches beyond the file: another requirements or constraints file, an editable or
 * local project, a local archive or find-links directory.
 */
export function localRequirement(line: string): boolean {
  const l = line.replace(/(^|\s)#.*$/, '').trim();
  if (!l) return false;
  if (/^(-r|-c|-e|--requirement|--constraint|--editable)\b/.test(l)) return true;
  const links = /^(-f|--find-links)[\s=]+(\S+)/.exec(l);
  if (links) return !/^https?:\/\//.test(links[2]);
  if (l.startsWith('-')) return false;
  if (/^(\.|\/|~|file:)/.test(l) || /@\s*file:/.test(l)) return true;
  if (/^[a-z][a-z0-9+.-]*:/i.test(l)) return false; // a URL: a repository or an archive to download
  // A bare path: a directory or an archive beside the file.
  return /^[^\s;=<>!~@]+\/|^[^\s;=<>!~@]+\.(whl|zip|tar\.gz|tgz|tar\.bz2)$/.test(l);
}

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
    sealable: !!lockfile && !nodeLocalRefs(dir, pkg, lockfile),
    rootScripts: ROOT_INSTALL_SCRIPTS.filter((s) => typeof scripts[s] === 'string'),
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
  const lines = reqFile.split('\n');
  const requirements = lines.some((l) => l.trim() && !l.trim().startsWith('#'));
  const entry = firstExisting(dir, PYTHON_ENTRY_FILES);
  const start = manifest?.prod ?? procfileWeb(dir) ?? (entry ? `python3 ${entry}` : undefined);
  if (!start)
    throw new PlanError(
      'no start command: add [entrypoint] prod = "<command>" to berth.toml, a Procfile "web:" line, or a main.py',
    );
  return {
    language: 'python',
    requirements,
    sealable: requirements && !lines.some(localRequirement),
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
  if (manifest?.prod)
    return { language: 'python', requirements: false, sealable: false, start: manifest.prod, manifest };
  throw new PlanError(
    'nothing to build: the upload has no package.json (Node), requirements.txt / pyproject.toml / main.py ' +
      '(Python), nor a berth.toml with [entrypoint] prod',
  );
}
