// The test suite runs compiled, not through tsx: the loader's hooks and transform cost about a CPU-second for
// each test file that loads the server, some five CPU-minutes over the suite. This writes `.test-build/<pid>/`, a mirror of
// the repository in which each TypeScript module of the type-checked tree (packages/*/src, packages/*/test, bench;
// the console's browser code excepted) is compiled beside a link to its source, and every other entry is a link to
// the real one. Paths a test computes from its own place (`../../../../templates`, the CLI, fixtures) so reach the
// same files, and a test that starts a `.ts` file with tsx still finds it.
import { mkdirSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';

export const TEST_BUILD = '.test-build';

/** Directories taken as they are, never compiled into: dependencies, build outputs, apps deployed by the tests. */
const AS_IS = new Set(['node_modules', 'dist', 'fixtures']);

/** Whether process `pid` is alive (a run that made a mirror and has not removed it yet). */
const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
};

/**
 * Compiles `root`'s tree into `root/.test-build/<pid>` and returns that directory: a run of its own, so two runs in
 * one checkout do not remove each other's (the mirror's root is as deep as the repository's, so paths a test computes
 * upwards land on its links). Mirrors left by runs that are gone are removed first.
 */
export async function buildTests(root) {
  const base = join(root, TEST_BUILD);
  mkdirSync(base, { recursive: true });
  for (const e of readdirSync(base))
    if (!/^\d+$/.test(e) || !alive(Number(e))) rmSync(join(base, e), { recursive: true, force: true });
  const out = join(base, String(process.pid));
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out);
  const sources = [];
  const link = (rel) => symlinkSync(resolve(root, rel), join(out, rel));
  const mirror = (rel) => {
    mkdirSync(join(out, rel), { recursive: true });
    for (const e of readdirSync(join(root, rel), { withFileTypes: true })) {
      const p = join(rel, e.name);
      if (e.isDirectory() && !AS_IS.has(e.name)) mirror(p);
      else {
        link(p);
        if (e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) sources.push(p);
      }
    }
  };
  for (const e of readdirSync(root, { withFileTypes: true })) {
    if (e.name === TEST_BUILD || e.name === '.git') {
      if (e.name === '.git') link(e.name);
      continue;
    }
    if (e.name === 'bench') mirror('bench');
    else if (e.name === 'packages') {
      mkdirSync(join(out, 'packages'));
      for (const pkg of readdirSync(join(root, 'packages'))) {
        mkdirSync(join(out, 'packages', pkg));
        for (const f of readdirSync(join(root, 'packages', pkg))) {
          const p = join('packages', pkg, f);
          const compiled = (f === 'src' && pkg !== 'console') || f === 'test';
          if (compiled) mirror(p);
          else link(p);
        }
      }
    } else link(e.name);
  }
  await build({
    absWorkingDir: resolve(root),
    entryPoints: sources,
    outdir: out,
    outbase: '.',
    format: 'esm',
    platform: 'node',
    target: 'node20',
    // Its paths lead back to the real files (outside the mirror): a failure's stack names the .ts file and line.
    sourcemap: 'linked',
    sourcesContent: false,
    logLevel: 'warning',
  });
  return out;
}
