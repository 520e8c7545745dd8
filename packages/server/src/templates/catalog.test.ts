import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { DEFAULT_TEMPLATES_DIR, loadCatalog, templateSha } from './catalog.js';

function withDir(fn: (dir: string) => void) {
  const dir = mkdtempSync(join(tmpdir(), 'berth-templates-'));
  try {
    fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('the sha changes with any file and ignores build output and dependencies', () =>
  withDir((dir) => {
    cpSync(join(DEFAULT_TEMPLATES_DIR, 'agent-typescript'), join(dir, 't'), { recursive: true });
    const t = join(dir, 't');
    const before = templateSha(t);
    mkdirSync(join(t, 'node_modules', 'x'), { recursive: true });
    writeFileSync(join(t, 'node_modules', 'x', 'index.js'), 'ignored');
    mkdirSync(join(t, 'dist'));
    writeFileSync(join(t, 'dist', 'index.js'), 'ignored');
    assert.equal(templateSha(t), before);
    writeFileSync(join(t, 'README.md'), 'changed');
    assert.notEqual(templateSha(t), before);
  }));

test('a template.json missing fields fails the load and names the folder and the fields', () =>
  withDir((dir) => {
    mkdirSync(join(dir, 'broken'));
    writeFileSync(join(dir, 'broken', 'template.json'), JSON.stringify({ name: 'broken', description: 'x' }));
    assert.throws(() => loadCatalog(dir), /broken\/template\.json is invalid: .*\/topics/);
  }));

test('a template whose name differs from its folder fails the load', () =>
  withDir((dir) => {
    cpSync(join(DEFAULT_TEMPLATES_DIR, 'agent-python'), join(dir, 'renamed'), { recursive: true });
    assert.throws(() => loadCatalog(dir), /name "agent-python" must equal its folder name/);
  }));

test('a missing templates directory is an empty catalog', () => {
  assert.deepEqual(loadCatalog(join(tmpdir(), 'berth-no-such-dir-for-templates')), []);
});
