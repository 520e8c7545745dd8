// `berth run model` and `berth usage`, run as a child process (the CLI from its TypeScript source) against
// a real server and the fake provider.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { loaderArgs, moduleFile } from '../../src/test-support/run-module.js';
import { connection, eventually, model, ok, startWorld, type World } from './setup.js';

const CLI_MAIN = moduleFile(join(import.meta.dirname, '../../../cli/src/main.ts'));
let w: World;

before(async () => {
  w = await startWorld();
  await connection(w.server, 'oa', 'openai', w.fake.url);
  await model(w.server, 'gpt', {
    integrationConnections: ['oa'],
    runtime: { type: 'openai', model: 'fake-gpt' },
  });
});
after(() => w.close());

function berth(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const script = `import { main } from ${JSON.stringify(CLI_MAIN)};
main(['node', 'berth', ...process.argv.slice(1)]).catch((e) => { console.error('berth: ' + e.message); process.exit(1); });`;
  const child = spawn(process.execPath, [...loaderArgs(), '--input-type=module', '-e', script, ...args], {
    env: {
      ...process.env,
      BERTH_URL: w.server.url,
      BERTH_API_KEY: w.server.adminKey,
      BERTH_CONFIG: '/nonexistent/berth.yaml',
    },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

test('berth run model prints the answer text, a stream’s as it comes; -o json the answer as the provider sent it', async () => {
  const body = '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2}';
  const r = await berth(['run', 'model', 'gpt', '--data', body]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, 'Hello from\n');
  const raw = await berth(['run', 'model', 'gpt', '--data', body, '-o', 'json']);
  assert.equal(JSON.parse(raw.stdout).choices[0].message.content, 'Hello from');
  const stream = '{"messages":[{"role":"user","content":"Hi"}],"stream":true}';
  const s = await berth(['run', 'model', 'gpt', '--data', stream]);
  assert.equal(s.code, 0, s.stderr);
  assert.equal(s.stdout, 'Hello from the fake provider\n');
  const events = await berth(['run', 'model', 'gpt', '--data', stream, '-o', 'json']);
  assert.match(events.stdout, /^data: /);
  assert.match(events.stdout, /data: \[DONE\]/);
  const models = await berth(['run', 'model', 'gpt', '--path', '/v1/models']);
  assert.equal(JSON.parse(models.stdout).data[0].id, 'fake-gpt');
});

test('berth run model reports errors with the provider’s message', async () => {
  const r = await berth(['run', 'model', 'gpt', '-m', 'please [status 400]']);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /fake error 400 as asked/);
  const bad = await berth(['run', 'model', 'gpt', '--data', '{nope']);
  assert.match(bad.stderr, /--data is not valid JSON/);
});

test('berth usage shows a table per model and key', async () => {
  await eventually(
    () => ok(w.server.api('/models/gpt/usage')),
    (rows: any[]) => rows[0]?.requests >= 3,
    'usage recorded',
  );
  const r = await berth(['usage', '--since', '1h']);
  assert.equal(r.code, 0, r.stderr);
  const [head, row] = r.stdout.trim().split('\n');
  assert.match(head, /^MODEL\s+KEY\s+CALLS\s+ERRORS\s+INPUT\s+OUTPUT\s+AVG MS$/);
  assert.match(row, /^gpt\s+ak-[0-9a-f]+\s+\d+\s+1\s+\d+\s+\d+\s+\d+$/);
  const json = await berth(['usage', '--model', 'gpt', '--by', 'hour', '-o', 'json']);
  assert.equal(JSON.parse(json.stdout)[0].model, 'gpt');
});
