// Build plans: the start command is resolved at build time in a fixed order, and a tree with none is a build
// error naming what to add; the manifest's wrong shapes name the field.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ManifestError, parseManifest } from './manifest.js';
import { localRequirement, PlanError, planBuild } from './plan.js';

const root = mkdtempSync(join(tmpdir(), 'berth-plan-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

function tree(files: Record<string, string>): string {
  const dir = join(root, String(n++));
  for (const [f, text] of Object.entries(files)) {
    mkdirSync(join(dir, f, '..'), { recursive: true });
    writeFileSync(join(dir, f), text);
  }
  return dir;
}

const pkg = (o: object) => JSON.stringify(o);

describe('start command resolution', () => {
  const cases: [string, Record<string, string>, string][] = [
    [
      '[entrypoint] prod wins over everything',
      {
        'berth.toml': '[entrypoint]\nprod = "node custom.js"\n',
        'package.json': pkg({ scripts: { start: 'x' } }),
      },
      'node custom.js',
    ],
    [
      'Procfile web: next',
      { Procfile: 'web: node web.js\n', 'package.json': pkg({ scripts: { start: 'x' } }) },
      'node web.js',
    ],
    [
      'scripts.prod before start',
      { 'package.json': pkg({ scripts: { prod: 'node p.js', start: 'node s.js' } }) },
      'node p.js',
    ],
    ['scripts.start', { 'package.json': pkg({ scripts: { start: 'node s.js' } }) }, 'node s.js'],
    ['main', { 'package.json': pkg({ main: 'lib/m.js' }), 'lib/m.js': '' }, 'node lib/m.js'],
    ['an index.js', { 'package.json': pkg({}), 'index.js': '' }, 'node index.js'],
    [
      'blaxel.toml when there is no berth.toml',
      { 'blaxel.toml': '[entrypoint]\nprod = "python3 x.py"\n', 'x.py': '' },
      'python3 x.py',
    ],
    ['python main.py', { 'requirements.txt': '', 'main.py': '' }, 'python3 main.py'],
  ];
  for (const [what, files, start] of cases)
    it(what, () => {
      assert.equal(planBuild(tree(files)).start, start);
    });

  it('none found is a build error saying what to add', () => {
    assert.throws(
      () => planBuild(tree({ 'package.json': pkg({}) })),
      (e: Error) => e instanceof PlanError && /start/.test(e.message),
    );
    assert.throws(() => planBuild(tree({ 'README.md': 'x' })), PlanError);
  });

  it('dependencies naming files of the project are not sealable; the root install scripts are listed in order', () => {
    const node = (files: Record<string, string>) => {
      const p = planBuild(tree({ 'index.js': '', 'package-lock.json': '{}', ...files }));
      assert.ok(p.language === 'node');
      return p.deps;
    };
    const registry = node({ 'package.json': pkg({ dependencies: { x: '^1', y: 'user/repo' } }) });
    assert.equal(registry.sealable, true);
    for (const spec of ['file:../lib', './lib', '../lib', 'link:x', 'workspace:*', 'lib/x.tgz'])
      assert.equal(
        node({ 'package.json': pkg({ dependencies: { x: spec } }) }).sealable,
        false,
        `${spec} is a file of the project`,
      );
    assert.equal(
      node({ 'package.json': pkg({ workspaces: ['a'], dependencies: { x: '1' } }) }).sealable,
      false,
    );
    assert.equal(
      node({
        'package.json': pkg({ dependencies: { x: '1' } }),
        'package-lock.json': JSON.stringify({ packages: { 'node_modules/x': { resolved: 'file:x' } } }),
      }).sealable,
      false,
    );
    const scripts = node({
      'package.json': pkg({ scripts: { prepare: 'a', build: 'b', postinstall: 'c', preinstall: 'd' } }),
    });
    assert.deepEqual(scripts.rootScripts, ['preinstall', 'postinstall', 'prepare']);
    const unlocked = planBuild(tree({ 'index.js': '', 'package.json': pkg({ dependencies: { x: '1' } }) }));
    assert.ok(unlocked.language === 'node' && !unlocked.deps.sealable);
  });

  it('requirements reaching beyond requirements.txt are not sealable', () => {
    for (const line of [
      'requests==2.31.0',
      'fastapi>=0.100',
      'git+https://host/r.git@v1#egg=r',
      'x @ https://h/x.whl',
      '--index-url https://p/simple',
      '# -e .',
    ])
      assert.equal(localRequirement(line), false, line);
    for (const line of [
      '-e .',
      '.',
      './pkg',
      '-r other.txt',
      '-c c.txt',
      'lib/',
      'x.whl',
      'x @ file:///x',
      '-f wheels',
      '--find-links=./w',
    ])
      assert.equal(localRequirement(line), true, line);
    const p = planBuild(tree({ 'main.py': '', 'requirements.txt': 'requests==2\n-e .\n' }));
    assert.ok(p.language === 'python' && p.requirements && !p.sealable);
  });
});

describe('manifest', () => {
  it('reads the fields a build uses', () => {
    const m = parseManifest(
      'blaxel.toml',
      'type = "agent"\nname = "x"\n[env]\nA = "1"\nB = 2\n[entrypoint]\nprod = "go"\n',
    );
    assert.deepEqual([m.type, m.name, m.prod, m.env], ['agent', 'x', 'go', { A: '1', B: '2' }]);
  });
  it('entrypoint as a string is an error naming the field with a sample', () => {
    assert.throws(
      () => parseManifest('berth.toml', 'entrypoint = "node x.js"\n'),
      (e: Error) => e instanceof ManifestError && /"entrypoint" must be a table/.test(e.message),
    );
  });
});
