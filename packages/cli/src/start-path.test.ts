// What a command loads before it runs: the static imports of `main` and of each command's module, followed through
// the CLI's own files. None may reach the server's code, and the libraries only some commands need (YAML, TOML,
// zip, WebSocket) must be loaded where they are used. `bench/cli/start.mjs` measures what this keeps fast.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';

const SRC = import.meta.dirname;
/** Loaded only by the commands that use them. */
const HEAVY = ['yaml', 'smol-toml', 'ws', 'yazl', 'ignore', 'undici'];
/** Static imports (`import … from`), not `import type` and not `import()`. */
const STATIC = /^import\s+(?!type\s)(?:[^'"]*?\sfrom\s+)?['"]([^'"]+)['"]/gm;

/** Every module `file` loads statically: its own files (followed) and the packages it names. */
function closure(file: string, seen = new Map<string, string[]>()): Map<string, string[]> {
  if (seen.has(file)) return seen;
  const specs = [...readFileSync(file, 'utf8').matchAll(STATIC)].map((m) => m[1]);
  seen.set(file, specs);
  for (const s of specs)
    if (s.startsWith('.')) closure(resolve(dirname(file), s.replace(/\.js$/, '.ts')), seen);
  return seen;
}

const packages = (graph: Map<string, string[]>) =>
  new Set([...graph.values()].flat().filter((s) => !s.startsWith('.') && !s.startsWith('node:')));

test('main loads commander and the kinds table only; a `get` adds no server code and no heavy library', () => {
  assert.deepEqual([...packages(closure(join(SRC, 'main.ts')))].sort(), ['commander']);
  for (const command of [
    'get.ts',
    'describe.ts',
    'apply.ts',
    'delete.ts',
    'login.ts',
    'sandbox.ts',
    'deploy.ts',
  ]) {
    const used = packages(closure(join(SRC, command)));
    for (const p of used) {
      assert.ok(!p.startsWith('@berth/server'), `${command} loads the server's ${p}`);
      assert.ok(!HEAVY.includes(p), `${command} loads ${p} before it is needed`);
    }
  }
  assert.deepEqual([...packages(closure(join(SRC, 'get.ts')))], ['@berth/sdk']);
});
