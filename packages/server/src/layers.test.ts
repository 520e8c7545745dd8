// The import graph of the server: every import goes down the layers (or stays in its folder), and no module
// imports itself back through a chain. A new folder must be given a layer here, deliberately. `controllers/` is
// split by vertical (decision 044): each of its folders is a unit with its own layer, so the table says which
// vertical may import which, and verticals of one layer (sandbox, workload, job) never import each other.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';

const SRC = dirname(new URL(import.meta.url).pathname);

/** Bottom (0) to top. A module may import its own folder and any folder of a lower layer. */
const LAYERS: Record<string, number> = {
  errors: 0,
  config: 0,
  'log-redact': 0,
  crypto: 1,
  outbound: 1,
  kinds: 1,
  'sandbox-api': 1,
  store: 2,
  auth: 3,
  http: 3,
  runtime: 3,
  models: 4,
  cluster: 4,
  oauth: 4,
  builds: 4,
  'controllers/core': 5,
  'controllers/config': 6,
  'controllers/volume': 6,
  'controllers/code': 7,
  'controllers/sandbox': 8,
  'controllers/workload': 8,
  'controllers/job': 8,
  templates: 9,
  gateway: 10,
  api: 10,
  // The composition root: main.ts and its steps in main/ (one module per thing it wires, decision 017).
  main: 11,
  index: 12,
};

function sources(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) {
      if (e !== 'test-support') sources(p, out);
    } else if (p.endsWith('.ts') && !p.endsWith('.test.ts') && !p.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/** The unit a file belongs to: its top folder, a vertical of `controllers/`, or the file itself at the top. */
const unitOf = (file: string) => {
  const rel = relative(SRC, file).split('/');
  if (rel[0] === 'controllers' && rel.length > 2) return `controllers/${rel[1]}`;
  return rel.length > 1 ? rel[0] : rel[0].replace(/\.ts$/, '');
};

/** Relative imports of a file (type-only ones too: they shape the layers as much as values do). */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const m of text.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)['"](\.{1,2}\/[^'"]+)['"]/g))
    out.push(resolve(dirname(file), m[1]).replace(/\.js$/, '.ts'));
  return out;
}

const files = sources(SRC);
const graph = new Map(files.map((f) => [f, importsOf(f)]));

describe('server layers', () => {
  it('every folder has a layer', () => {
    const missing = [...new Set(files.map(unitOf))].filter((u) => !(u in LAYERS));
    assert.deepEqual(missing, []);
  });

  it('no import goes up a layer or sideways into another folder of the same layer', () => {
    const bad: string[] = [];
    for (const [file, deps] of graph) {
      const from = unitOf(file);
      for (const dep of deps) {
        const to = unitOf(dep);
        if (to !== from && !(LAYERS[to] < LAYERS[from]))
          bad.push(`${relative(SRC, file)} -> ${relative(SRC, dep)}`);
      }
    }
    assert.deepEqual(bad, []);
  });

  it('no import cycle between modules', () => {
    const state = new Map<string, 'open' | 'done'>();
    const cycles: string[] = [];
    const visit = (f: string, path: string[]) => {
      if (state.get(f) === 'done') return;
      if (state.get(f) === 'open') {
        cycles.push([...path.slice(path.indexOf(f)), f].map((p) => relative(SRC, p)).join(' -> '));
        return;
      }
      state.set(f, 'open');
      for (const d of graph.get(f) ?? []) if (graph.has(d)) visit(d, [...path, f]);
      state.set(f, 'done');
    };
    for (const f of files) visit(f, []);
    assert.deepEqual(cycles, []);
  });
});
