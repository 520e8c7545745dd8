// The shell scripts of a build's two steps, from the plan (plan.ts). Paths are the sandboxes' own.
// - The install step (installScript) sees only the install inputs at /src (package.json without its scripts, the
//   lockfile, .npmrc; or requirements.txt) and writes /app, which the server then seals into the workspace's
//   dependency cache (dependency-cache.ts). No code of the project runs there.
// - The build step (buildScript) sees the whole source read-only at /src, writes the app at /app (the same path
//   replicas see it at, so a Python venv built there works unchanged), and, when the plan's dependencies are cached,
//   the one sealed entry read-only at /cache: it copies it, runs the root package's own install scripts, then the
//   build script. Every step says what it does in the build log.
import type { BuildPlan } from './plan.js';

export const SRC_MOUNT = '/src';
export const APP_MOUNT = '/app';
export const CACHE_MOUNT = '/cache';
/** What a node entry of the cache holds, and a python one: installed at /app, copied to /app. */
export const NODE_MODULES = 'node_modules';
export const VENV = '.venv';

/** Single-quoted for sh. */
export const shq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

const PREAMBLE = [
  'set -eu',
  'say() { printf "berth: %s\\n" "$*"; }',
  'export npm_config_update_notifier=false CI=true',
  // GNU cp keeps modes and times without trying owners (the sandbox maps one uid); BusyBox's (Alpine images)
  // has no --preserve, and its -p would complain of every owner it cannot keep: modes then follow the umask.
  'probe=/tmp/.berth-cp-probe.$$',
  'if cp --preserve=mode,timestamps /dev/null "$probe" 2>/dev/null; then copy() { cp -dR --preserve=mode,timestamps "$@"; }; else copy() { cp -PR "$@"; }; fi',
  'rm -f "$probe"',
  `cd ${APP_MOUNT}`,
];

const INSTALL: Record<string, string> = {
  'package-lock.json': 'npm ci --no-audit --no-fund',
  'npm-shrinkwrap.json': 'npm ci --no-audit --no-fund',
  'pnpm-lock.yaml': 'pnpm install --frozen-lockfile',
  'yarn.lock': 'yarn install --frozen-lockfile',
};

const VENV_PIP = `${APP_MOUNT}/${VENV}/bin/pip install --no-input --disable-pip-version-check`;

/** The install step's script: the package manager over the install inputs (pinned by `lockfile`), into /app. */
export function installScript(kind: BuildPlan['language'], lockfile: string): string {
  const install =
    kind === 'node'
      ? [`copy ${SRC_MOUNT}/. ${APP_MOUNT}/`, INSTALL[lockfile]]
      : [`python3 -m venv ${APP_MOUNT}/${VENV}`, `${VENV_PIP} -r ${SRC_MOUNT}/${lockfile}`];
  return [...PREAMBLE, ...install].join('\n');
}

function nodeSteps(plan: Extract<BuildPlan, { language: 'node' }>, cached: boolean): string[] {
  const d = plan.deps;
  const out: string[] = [];
  if (d.vendored) out.push('say "node_modules came with the upload: installing nothing"');
  else if (!d.any) out.push('say "no dependencies declared"');
  else if (cached) {
    out.push(
      `say "node_modules from the workspace's dependency cache"`,
      `if [ -d ${CACHE_MOUNT}/${NODE_MODULES} ]; then copy ${CACHE_MOUNT}/${NODE_MODULES} ${APP_MOUNT}/${NODE_MODULES}; fi`,
    );
    for (const s of d.rootScripts)
      out.push(`say "npm run ${s} (the project's own install script)"`, `npm run ${s}`);
  } else if (d.lockfile) {
    const install = INSTALL[d.lockfile];
    out.push(`say "dependencies name files of the project: ${install} here, not cached"`, install);
  } else {
    out.push('say "no lockfile: npm install (add package-lock.json for repeatable, cacheable builds)"');
    out.push('npm install --no-audit --no-fund');
  }
  if (plan.buildScript) {
    out.push('say "npm run build"', 'npm run build');
    if (!d.vendored && d.any)
      out.push(
        'say "npm prune --omit=dev"',
        'npm prune --omit=dev --no-audit --no-fund --offline || say "prune skipped: dev dependencies stay"',
      );
  }
  return out;
}

function pythonSteps(plan: Extract<BuildPlan, { language: 'python' }>, cached: boolean): string[] {
  if (!plan.requirements) return ['say "no requirements: the standard library only"'];
  if (cached)
    return [
      `say "${VENV} from the workspace's dependency cache"`,
      `copy ${CACHE_MOUNT}/${VENV} ${APP_MOUNT}/${VENV}`,
    ];
  return [
    `say "requirements.txt names files of the project: python3 -m venv ${APP_MOUNT}/${VENV}; pip install -r requirements.txt here, not cached"`,
    `python3 -m venv ${APP_MOUNT}/${VENV}`,
    `${VENV_PIP} -r requirements.txt`,
  ];
}

/** The interpreter the start command and the install steps need: the build fails at once without it. */
const TOOL = { node: 'node', python: 'python3' } as const;

/** The build step's script; `cached`: the plan's sealed dependencies are mounted at /cache. */
export function buildScript(plan: BuildPlan, cached: boolean): string {
  const tool = TOOL[plan.language];
  return [
    ...PREAMBLE,
    `copy ${SRC_MOUNT}/. ${APP_MOUNT}/`,
    `say ${shq(`${plan.language} project; start command: ${plan.start}`)}`,
    // The image's own interpreter (an image without one fails here, with the shell's own "not found").
    `version=$(${tool} --version)`,
    `say "${tool}: $(command -v ${tool}) $version"`,
    ...(plan.language === 'node' ? nodeSteps(plan, cached) : pythonSteps(plan, cached)),
    'say "build done"',
  ].join('\n');
}
