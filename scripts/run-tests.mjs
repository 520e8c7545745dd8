// Finds every *.test.ts beside the code (and under packages/*/test) and runs them with node's test runner, compiled
// first (test-build.mjs): a short summary on stdout (test-summary.mjs), the full TAP in .test-results/tap.log.
// Arguments are substrings of test file paths to run only those. Exits non-zero when any test failed.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { buildTests } from './test-build.mjs';

const roots = ['packages', 'bench'];
const LOG_DIR = '.test-results';
const TAP_LOG = join(LOG_DIR, 'tap.log');
/**
 * Per-test bound, which node's runner also applies to each file as a whole: the cluster files (three servers, a
 * PostgreSQL, builds, kill -9 and failover) take up to two minutes beside two other files on a loaded host.
 */
const TEST_TIMEOUT_MS = 240_000;

const files = [];
const walk = (dir) => {
  for (const e of readdirSync(dir)) {
    if (e === 'node_modules' || e === 'dist') continue;
    const p = join(dir, e);
    if (statSync(p).isDirectory()) walk(p);
    else if (p.endsWith('.test.ts')) files.push(p);
  }
};
for (const r of roots) walk(r);
const only = process.argv.slice(2);
const selected = only.length ? files.filter((f) => only.some((o) => f.includes(o))) : files;
if (!selected.length) {
  console.error(`no test files matched ${only.join(' ')}`);
  process.exit(1);
}
mkdirSync(LOG_DIR, { recursive: true });
const built = await buildTests('.');
const r = spawnSync(
  process.execPath,
  [
    '--enable-source-maps',
    '--test',
    '--test-concurrency=3',
    `--test-timeout=${TEST_TIMEOUT_MS}`,
    '--test-reporter=./scripts/test-summary.mjs',
    '--test-reporter-destination=stdout',
    '--test-reporter=tap',
    `--test-reporter-destination=${TAP_LOG}`,
    ...selected.sort().map((f) => join(built, f.replace(/\.ts$/, '.js'))),
  ],
  {
    stdio: 'inherit',
    env: {
      ...process.env,
      BERTH_TAP_LOG: TAP_LOG,
      BERTH_TEST_FILES: String(selected.length),
      BERTH_TEST_STARTED_MS: String(Date.now()),
    },
  },
);
rmSync(built, { recursive: true, force: true });
process.exit(r.status ?? 1);
