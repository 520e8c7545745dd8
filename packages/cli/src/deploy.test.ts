// What `berth deploy` sends for a manifest: the service's blaxel.toml `[runtime] timeout` and `[[triggers]]` (an
// http trigger's path) reach an agent's spec; a job's manifest keeps its own fields, `[runtime] image` and its triggers
// included; a key that is no spec field is sent for the server to refuse (with its "did you mean"), and the refusal
// is said in the manifest's terms; blaxel.toml keys Berth has no use for are warned about, never dropped in silence.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ApiFailure } from './client.js';
import { manifestKey, manifestObject, manifestProblem } from './manifest.js';

test('a blaxel.toml agent with a runtime timeout and an http trigger path is sent with both', async () => {
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
    const o = await manifestObject(dir);
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
    const job = await manifestObject(dir);
    assert.deepEqual(JSON.parse(JSON.stringify(job.body.spec.triggers)), [{ type: 'schedule' }]);
    assert.deepEqual(job.body.spec.runtime, { timeout: 60, image: 'local/tools:1' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a typo is sent for the server to judge and its refusal names the manifest key; unused keys warn', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-manifest-'));
  try {
    writeFileSync(
      join(dir, 'berth.toml'),
      'name = "typo"\nworkspace = "elsewhere"\npubilc = true\n[runtime]\nmemroy = 256\n[entrypoint]\nprod = "node a.js"\n',
    );
    const m = await manifestObject(dir);
    assert.deepEqual(m.specKeys, ['pubilc', 'runtime']);
    assert.equal(m.body.spec.pubilc, true, 'sent as it is: the server refuses it with a suggestion');
    assert.match(m.warnings.join('\n'), /berth\.toml: workspace is not used here/);
    const refusal = new ApiFailure(400, {
      detail: 'unknown fields',
      errors: [
        { pointer: '/spec/pubilc', message: 'is not a known field; did you mean "public"?' },
        { pointer: '/spec/runtime/memroy', message: 'is not a known field; did you mean "memory"?' },
      ],
    });
    assert.equal(
      manifestProblem(m, refusal),
      'berth.toml: pubilc: is not a known field; did you mean "public"?\nberth.toml: runtime.memroy: is not a known field; did you mean "memory"?',
    );
    assert.equal(manifestKey('/spec/triggers/0/configuration/path'), 'triggers[0].configuration.path');

    writeFileSync(join(dir, 'berth.toml'), 'type = "agnet"\n');
    await assert.rejects(manifestObject(dir), /berth\.toml: type "agnet" is not one of agent, function/);
    writeFileSync(join(dir, 'berth.toml'), '[entrypoint]\nprood = "x"\n');
    await assert.rejects(
      manifestObject(dir),
      /entrypoint\.prood is not a known field \(entrypoint takes prod, dev\)/,
    );
    writeFileSync(join(dir, 'berth.toml'), 'name = [1\n');
    await assert.rejects(manifestObject(dir), /berth\.toml is not valid TOML/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
