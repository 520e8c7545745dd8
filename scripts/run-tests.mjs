// Finds every *.test.ts beside the code (and under packages/*/test) and runs them with node's test runner.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const roots = ['packages', 'bench'];
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
  console.error('no test files matched');
  process.exit(1);
}
const r = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-timeout=120000', ...selected.sort()],
  { stdio: 'inherit' },
);
process.exit(r.status ?? 1);
