// Runs the built `berth` binary as a child process against a real server.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import YAML from 'yaml';
import { startTestServer, type TestServer } from '../../server/src/test-support/server.js';

const ROOT = join(import.meta.dirname, '../../..');
const BIN = join(ROOT, 'packages/cli/bin/berth.mjs');

/** Newest source file of a package (tests excluded), to tell whether its build is older. */
function newestSource(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) t = Math.max(t, newestSource(p));
    else if (p.endsWith('.ts') && !p.endsWith('.test.ts')) t = Math.max(t, statSync(p).mtimeMs);
  }
  return t;
}

/** The test script builds before testing; a developer running this file alone gets a build when it is stale. */
function ensureBuilt() {
  const stale = ['server', 'sdk', 'cli'].some((p) => {
    const info = join(ROOT, 'packages', p, 'tsconfig.tsbuildinfo');
    let built = 0;
    try {
      built = statSync(info).mtimeMs;
    } catch {}
    return newestSource(join(ROOT, 'packages', p, 'src')) > built;
  });
  if (!stale) return;
  const r = spawnSync(
    process.execPath,
    [join(ROOT, 'node_modules/typescript/bin/tsc'), '-b', 'packages/cli'],
    {
      cwd: ROOT,
      encoding: 'utf8',
    },
  );
  // tsc -b still emits when some file has a type error; the type check of the test script reports
  // those, and what the CLI does is judged by the assertions below.
  if (r.status !== 0) console.error(`build reported errors:\n${r.stdout}${r.stderr}`);
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

describe('berth CLI', () => {
  let s: TestServer;
  let dir: string;
  let env: Record<string, string>;

  function berth(args: string[], opts: { input?: string; env?: Record<string, string> } = {}): Promise<Run> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [BIN, ...args], { env: { ...env, ...opts.env }, cwd: dir });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => {
        stdout += d;
      });
      child.stderr.on('data', (d) => {
        stderr += d;
      });
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
      child.stdin.end(opts.input ?? '');
    });
  }

  async function ok(args: string[], opts?: { input?: string; env?: Record<string, string> }) {
    const r = await berth(args, opts);
    assert.equal(r.code, 0, `berth ${args.join(' ')} failed: ${r.stderr}`);
    return r.stdout;
  }

  before(async () => {
    ensureBuilt();
    s = await startTestServer();
    dir = mkdtempSync(join(tmpdir(), 'berth-cli-'));
    // Only what the CLI needs: no BERTH_* from the developer's shell may leak into the child.
    env = { PATH: process.env.PATH ?? '', HOME: dir, BERTH_CONFIG: join(dir, 'cfg', 'config.yaml') };
  });
  after(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const twoDocs = (limit: number) => `kind: Policy
metadata:
  name: token-cap
  labels: { team: ml }
spec:
  type: maxToken
  maxTokens: { total: ${limit}, granularity: day }
---
kind: IntegrationConnection
metadata:
  name: openai-main
spec:
  integration: openai
  secret:
    apiKey: sk-test-123
`;

  it('login writes the config file readable by its owner only', async () => {
    const out = await ok(['login', '--url', s.url, '--key', s.adminKey, '--workspace', 'default']);
    assert.match(out, /saved/);
    const path = env.BERTH_CONFIG;
    assert.equal(statSync(path).mode & 0o777, 0o600);
    assert.deepEqual(YAML.parse(readFileSync(path, 'utf8')), {
      url: s.url,
      apiKey: s.adminKey,
      workspace: 'default',
    });
  });

  it('apply creates both documents of a multi-document file, and get shows them', async () => {
    const file = join(dir, 'two.yaml');
    writeFileSync(file, twoDocs(1000));
    const out = await ok(['apply', '-f', file]);
    assert.equal(out, 'policy/token-cap created\nintegrationconnection/openai-main created\n');

    const policies = JSON.parse(await ok(['get', 'policies', '-o', 'json']));
    assert.deepEqual(
      policies.map((p: any) => [p.metadata.name, p.spec.maxTokens.total]),
      [['token-cap', 1000]],
    );
    const conn = JSON.parse(await ok(['get', 'connection', 'openai-main', '-o', 'json']));
    assert.equal(conn.spec.integration, 'openai');
    assert.notEqual(conn.spec.secret.apiKey, 'sk-test-123', 'secrets are redacted');
  });

  it('get prints a NAME/STATUS/AGE table by default and YAML that apply takes back', async () => {
    const table = (await ok(['get', 'policy'])).trimEnd().split('\n');
    assert.deepEqual(table[0].split(/\s+/), ['NAME', 'STATUS', 'AGE']);
    assert.match(table[1], /^token-cap\s+-\s+\d+s$/);
    const one = await ok(['get', 'pol', 'token-cap']);
    assert.match(one, /^NAME\s+STATUS\s+AGE\ntoken-cap\s/);

    const yaml = await ok(['get', 'policies', 'token-cap', '-o', 'yaml']);
    const doc = YAML.parse(yaml);
    assert.equal(doc.kind, 'Policy');
    assert.equal(doc.metadata.name, 'token-cap');
    assert.equal(await ok(['apply', '-f', '-'], { input: yaml }), 'policy/token-cap unchanged\n');
  });

  it('apply again reports what changed: a new limit configures, a resent secret is a change too', async () => {
    const out = await ok(['apply', '-f', '-'], {
      input: twoDocs(5000),
      env: { BERTH_CONFIG: join(dir, 'none.yaml'), BERTH_URL: s.url, BERTH_API_KEY: s.adminKey },
    });
    assert.equal(out, 'policy/token-cap configured\nintegrationconnection/openai-main configured\n');
    const p = JSON.parse(await ok(['get', 'policy', 'token-cap', '-o', 'json']));
    assert.equal(p.spec.maxTokens.total, 5000);
    assert.equal(p.metadata.labels.team, 'ml');
  });

  it('delete removes an object; a later get fails with the server detail', async () => {
    assert.equal(await ok(['delete', 'policy', 'token-cap']), 'policy/token-cap deleted\n');
    const r = await berth(['get', 'policy', 'token-cap']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /Policy "token-cap" not found/);
    assert.equal(r.stdout, '');
  });

  it('a bad document exits 1 and prints each invalid field once', async () => {
    const bad = 'kind: Policy\nmetadata: { name: broken }\nspec:\n  type: location\n  sandbox: maybe\n';
    const r = await berth(['apply', '-f', '-'], { input: bad });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /policy\/broken/);
    assert.match(r.stderr, /\/spec\/sandbox: must be true or false/);
    assert.equal(r.stderr.split('/spec/sandbox').length - 1, 1, `each field once:\n${r.stderr}`);
    assert.match(
      r.stderr,
      /\/spec\/locations: a location policy needs at least one location|\/spec\/sandbox/,
    );
    assert.equal(r.stdout, '');
    const missing = await berth(['get', 'policy', 'broken']);
    assert.equal(missing.code, 1, 'nothing was created');
  });

  it('apply rejects unknown fields and unknown kinds before anything is sent', async () => {
    const typo =
      'kind: Policy\nmetadata: { name: typo }\nspec:\n  type: location\n  locations: [{ name: eu }]\n  locatoins: []\n';
    const r = await berth(['apply', '-f', '-'], { input: typo });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /\/spec\/locatoins: is not a known field; did you mean "locations"\?/);

    const mixed = `kind: Policy\nmetadata: { name: fine }\nspec: { type: location, locations: [{ name: eu }] }\n---\nkind: Gizmo\nmetadata: { name: g }\n`;
    const u = await berth(['apply', '-f', '-'], { input: mixed });
    assert.equal(u.code, 1);
    assert.match(u.stderr, /unknown kind "Gizmo"/);
    assert.equal(
      (await berth(['get', 'policy', 'fine'])).code,
      1,
      'the valid document before it was not sent',
    );
  });

  it('apply with --field-validation Warn stores the object and prints each dropped field with a suggestion', async () => {
    const typo =
      'kind: Policy\nmetadata: { name: warned, lables: { a: b } }\nspec: { type: location, locations: [{ name: eu }] }\n';
    const r = await berth(['apply', '-f', '-', '--field-validation', 'Warn'], { input: typo });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'policy/warned created\n');
    assert.equal(
      r.stderr,
      'warning: policy/warned: /metadata/lables: is not a known field and was ignored; did you mean "labels"?\n',
    );
  });

  it('apply says unchanged when the server keeps the object as it was, configured when labels change', async () => {
    const doc = (team: string) =>
      `kind: Policy\nmetadata: { name: steady, labels: { team: ${team} } }\nspec: { type: location, locations: [{ name: eu }] }\n`;
    assert.equal(await ok(['apply', '-f', '-'], { input: doc('a') }), 'policy/steady created\n');
    assert.equal(await ok(['apply', '-f', '-'], { input: doc('a') }), 'policy/steady unchanged\n');
    assert.equal(await ok(['apply', '-f', '-'], { input: doc('b') }), 'policy/steady configured\n');
  });

  it('--version prints the CLI version and the version the server reports', async () => {
    const version = JSON.parse(readFileSync(join(ROOT, 'packages/server/package.json'), 'utf8')).version;
    const out = await ok(['--version']);
    assert.equal(out, `berth CLI ${version}\nserver ${version} at ${s.url}\n`);
    const alone = await berth(['-V'], { env: { BERTH_CONFIG: join(dir, 'none.yaml') } });
    assert.equal(alone.code, 0);
    assert.equal(alone.stdout, `berth CLI ${version}\n`, 'without a server, the CLI version alone');
  });

  it('status shows the server version and counts sandboxes, models and agents', async () => {
    const report = JSON.parse(await ok(['status', '-o', 'json']));
    assert.equal(report.server.status, 'ok');
    assert.match(report.server.version, /^\d+\.\d+\.\d+/);
    assert.deepEqual(report.sandboxes, { total: 0, byStatus: {}, byState: {} });
    assert.equal(report.models, 0);
    assert.equal(report.agents, 0);
    const table = await ok(['status']);
    assert.match(table, /^server\s+http:\/\/127\.0\.0\.1:\d+ \(ok, version \d/m);
    assert.match(table, /^sandboxes\s+0$/m);
    const down = await berth(['status'], { env: { BERTH_URL: 'http://127.0.0.1:1', BERTH_API_KEY: 'k' } });
    assert.equal(down.code, 1);
    assert.match(down.stderr, /berth: cannot reach http:\/\/127\.0\.0\.1:1/);
  });

  it('completion bash completes commands, subcommands, flags and kinds', async () => {
    const script = join(dir, 'berth.bash');
    writeFileSync(script, await ok(['completion', 'bash']));
    const complete = (words: string[]) => {
      const r = spawnSync(
        'bash',
        [
          '-c',
          `source "$1"; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _berth; echo "\${COMPREPLY[*]}"`,
          'bash',
          script,
        ],
        { encoding: 'utf8' },
      );
      assert.equal(r.status, 0, r.stderr);
      return r.stdout.trim().split(' ');
    };
    assert.deepEqual(complete(['berth', 'sta']), ['status']);
    assert.deepEqual(complete(['berth', 'sandbox', 'lo']), ['logs']);
    assert.deepEqual(complete(['berth', 'sbx', 'logs', '--fo']), ['--follow']);
    assert.ok(complete(['berth', 'get', 'pol']).includes('policies'));
    assert.deepEqual(complete(['berth', 'completion', '']), ['bash', 'zsh']);
    const zsh = await ok(['completion', 'zsh']);
    assert.match(zsh, /bashcompinit/);
    const bad = await berth(['completion', 'fish']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /use bash or zsh/);
  });

  it('a wrong credential exits 1 with the problem detail', async () => {
    const r = await berth(['get', 'policies'], { env: { BERTH_API_KEY: 'bk_wrong' } });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /berth: .+/);
    assert.doesNotMatch(r.stderr, /at .+\.js:\d+/, 'no stack trace');
  });
});
