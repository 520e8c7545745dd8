// The shell script a build sandbox runs, from the plan (plan.ts). Paths are the build sandbox's own: the source
// read-only at /src, the output at /app (the same path replicas see it at, so a Python venv built there works
// unchanged), the workspace's dependency cache at /cache. Every step says what it does in the build log.
import type { BuildPlan } from './plan.js';

export const SRC_MOUNT = '/src';
export const APP_MOUNT = '/app';
export const CACHE_MOUNT = '/cache';

/** Single-quoted for sh. */
export const shq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

const INSTALL: Record<string, string> = {
  'package-lock.json': 'npm ci --no-audit --no-fund',
  'npm-shrinkwrap.json': 'npm ci --no-audit --no-fund',
  'pnpm-lock.yaml': 'pnpm install --frozen-lockfile',
  'yarn.lock': 'yarn install --frozen-lockfile',
};

function nodeSteps(plan: Extract<BuildPlan, { language: 'node' }>): string[] {
  const d = plan.deps;
  const out: string[] = [];
  if (d.vendored) out.push('say "node_modules came with the upload: installing nothing"');
  else if (d.lockfile && d.cacheKey) {
    const cached = `${CACHE_MOUNT}/node/${d.cacheKey}`;
    out.push(
      `if [ -d ${cached}/node_modules ]; then`,
      `  say "dependency cache hit (${d.lockfile} ${d.cacheKey}): installing nothing"`,
      `  copy ${cached}/node_modules ${APP_MOUNT}/node_modules`,
      'else',
      `  say "dependency cache miss (${d.lockfile} ${d.cacheKey}): ${INSTALL[d.lockfile]}"`,
      `  ${INSTALL[d.lockfile]}`,
      `  tmp=${cached}.partial.$$; rm -rf "$tmp"; mkdir -p "$tmp"`,
      `  copy ${APP_MOUNT}/node_modules "$tmp"/ && mv -T "$tmp" ${cached} || rm -rf "$tmp"`,
      'fi',
    );
  } else if (d.any) {
    out.push('say "no lockfile: npm install (add package-lock.json for repeatable, cacheable builds)"');
    out.push('npm install --no-audit --no-fund');
  } else out.push('say "no dependencies declared"');
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

function pythonSteps(plan: Extract<BuildPlan, { language: 'python' }>): string[] {
  if (!plan.requirements) return ['say "no requirements: the standard library only"'];
  return [
    `say "python3 -m venv ${APP_MOUNT}/.venv; pip install -r requirements.txt"`,
    `python3 -m venv ${APP_MOUNT}/.venv`,
    `PIP_CACHE_DIR=${CACHE_MOUNT}/pip ${APP_MOUNT}/.venv/bin/pip install --no-input --disable-pip-version-check -r requirements.txt`,
  ];
}

/** The interpreter the start command and the install steps need: the build fails at once without it. */
const TOOL = { node: 'node', python: 'python3' } as const;

export function buildScript(plan: BuildPlan): string {
  const tool = TOOL[plan.language];
  return [
    'set -eu',
    'say() { printf "berth: %s\\n" "$*"; }',
    'export npm_config_update_notifier=false CI=true',
    // GNU cp keeps modes and times without trying owners (the sandbox maps one uid); BusyBox's (Alpine images)
    // has no --preserve, and its -p would complain of every owner it cannot keep: modes then follow the umask.
    'probe=/tmp/.berth-cp-probe.$$',
    'if cp --preserve=mode,timestamps /dev/null "$probe" 2>/dev/null; then copy() { cp -dR --preserve=mode,timestamps "$@"; }; else copy() { cp -PR "$@"; }; fi',
    'rm -f "$probe"',
    `cd ${APP_MOUNT}`,
    `copy ${SRC_MOUNT}/. ${APP_MOUNT}/`,
    `say ${shq(`${plan.language} project; start command: ${plan.start}`)}`,
    // The image's own interpreter (an image without one fails here, with the shell's own "not found").
    `version=$(${tool} --version)`,
    `say "${tool}: $(command -v ${tool}) $version"`,
    ...(plan.language === 'node' ? nodeSteps(plan) : pythonSteps(plan)),
    'say "build done"',
  ].join('\n');
}
