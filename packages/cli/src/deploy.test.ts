// What `berth deploy` sends for a manifest: the service's blaxel.toml `[runtime] timeout` and `[[triggers]]` (an
// http trigger's path) reach an agent's spec; a job's manifest keeps its own fields, `[runtime] image` included.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { manifestObject } from './deploy.js';

test('a blaxel.toml agent with a runtime timeout and an http trigger path is sent with both', () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-manifest-'));
  try {
    writeFileSync(
      join(dir, 'blaxel.toml'),
      [
        'type = "agent"',
        'name = "My Agent"',
        '[runtime]',
        'memory = 512',
        'timeout = 60',
        '[[triggers]]',
        'id = "web"',
        'type = "http"',
        '[triggers.configuration]',
        'path = "agents/my-agent/chat"',
      ].join('\n'),
    );
    const o = manifestObject(dir);
    assert.equal(o.plural, 'agents');
    assert.equal(o.name, 'my-agent');
    assert.deepEqual(o.body.spec.runtime, { memory: 512, timeout: 60 });
    // Compared as sent (the TOML parser makes null-prototype objects).
    assert.deepEqual(JSON.parse(JSON.stringify(o.body.spec.triggers)), [
      { id: 'web', type: 'http', configuration: { path: 'agents/my-agent/chat' } },
    ]);
    writeFileSync(
      join(dir, 'blaxel.toml'),
      'type = "job"\n[runtime]\ntimeout = 60\nimage = "local/tools:1"\n[[triggers]]\ntype = "schedule"\n',
    );
    const job = manifestObject(dir);
    assert.equal(job.body.spec.triggers, undefined);
    assert.deepEqual(job.body.spec.runtime, { timeout: 60, image: 'local/tools:1' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
