// Runs the built `berth` binary as a child process against a real server.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import YAML from 'yaml';
import { startTestServer, type TestServer } from '../../server/src/test-support/server.js';

const ROOT = join(import.meta.dirname, '../../..');
/** The escape character that starts every colour and cursor code. */
const ESC = '\u001b';
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

  it('login refuses a key the server refuses and saves nothing; --no-verify saves without asking', async () => {
    const wrong = await berth(['login', '--url', s.url, '--key', 'bk_wrong']);
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /not saved: the server refused this key/);
    assert.equal(existsSync(env.BERTH_CONFIG), false, 'nothing was written');
    const elsewhere = await berth(['login', '--url', s.url, '--key', s.adminKey, '--workspace', 'nope']);
    assert.equal(elsewhere.code, 1);
    assert.match(elsewhere.stderr, /not saved: this key cannot act in workspace "nope"/);
    const down = await berth(['login', '--url', 'http://127.0.0.1:1', '--key', 'k']);
    assert.equal(down.code, 1);
    assert.match(down.stderr, /not saved: cannot reach .*--no-verify saves it anyway/);
    const unchecked = await ok(['login', '--url', 'http://127.0.0.1:1', '--key', 'k', '--no-verify']);
    assert.match(unchecked, /^saved \(not checked\) http:\/\/127\.0\.0\.1:1/);
  });

  it('login checks the key and writes the config file readable by its owner only', async () => {
    const out = await ok(['login', '--url', s.url, '--key', s.adminKey, '--workspace', 'default']);
    assert.match(out, /^logged in to http:\/\/127\.0\.0\.1:\d+ \(workspace default\)/);
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

  it('get prints a table with the kind’s columns by default and YAML that apply takes back', async () => {
    const table = (await ok(['get', 'policy'])).trimEnd().split('\n');
    assert.deepEqual(table[0].split(/\s+/), ['NAME', 'TYPE', 'AGE']);
    assert.match(table[1], /^token-cap\s+maxToken\s+\d+s$/);
    const one = await ok(['get', 'pol', 'token-cap']);
    assert.match(one, /^NAME\s+TYPE\s+AGE\ntoken-cap\s/);

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

  const model = (name: string, connection: string) =>
    `kind: Model\nmetadata: { name: ${name} }\nspec:\n  runtime: { type: openai, model: gpt-4o-mini }\n  integrationConnections: [${connection}]\n`;

  /** A connection of another provider's wire: a model of type openai naming it is FAILED, saying why. */
  const connection = (name: string, integration: string) =>
    `kind: IntegrationConnection\nmetadata: { name: ${name} }\nspec: { integration: ${integration}, secret: { apiKey: sk-x } }\n`;

  it('apply waits for what it wrote and exits 1 with the reason an object FAILED; describe shows it with its events', async () => {
    await ok(['apply', '-f', '-'], { input: connection('claude', 'anthropic') });
    const r = await berth(['apply', '-f', '-'], { input: model('lonely', 'claude') });
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stdout, 'model/lonely created\n');
    assert.match(r.stderr, /^model\/lonely FAILED: .*anthropic connection/m);
    const quiet = await berth(['apply', '-f', '-', '--no-wait'], { input: model('lonely', 'claude') });
    assert.equal(quiet.code, 0, '--no-wait reports the write only');
    const d = await ok(['describe', 'model', 'lonely']);
    assert.match(d, /^Status:\s+FAILED$/m);
    assert.match(d, /^Reason:\s+.*anthropic connection/m);
    assert.match(d, /^Events:\n\s+AGE\s+STATUS\s+MESSAGE\n\s+\d+s\s+DEPLOYING\s+created by /m);
    assert.ok(!(r.stderr + d).includes(ESC), 'no escape code in a pipe');
    const wide = (await ok(['get', 'models', '-o', 'wide'])).split('\n');
    assert.deepEqual(wide[0].split(/\s{2,}/), ['NAME', 'STATUS', 'PROVIDER', 'MODEL', 'AGE', 'REASON']);
    assert.match(wide[1], /^lonely\s+FAILED\s+openai\s+gpt-4o-mini\s+\d+s\s+.*anthropic connection/);
  });

  it('get --watch prints a row when an object’s status changes', async () => {
    await ok(['apply', '-f', '-'], { input: connection('late', 'anthropic') });
    await ok(['apply', '-f', '-', '--no-wait'], { input: model('waiting', 'late') });
    const child = spawn(process.execPath, [BIN, 'get', 'models', '--watch'], { env, cwd: dir });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    const seen = async (re: RegExp) => {
      for (let i = 0; i < 200 && !re.test(out); i++) await new Promise((r) => setTimeout(r, 50));
      assert.match(out, re);
    };
    try {
      await seen(/^waiting\s+FAILED\s/m);
      await ok(['apply', '-f', '-'], { input: connection('late', 'openai') });
      await seen(/^waiting\s+DEPLOYED\s/m);
      assert.match(out.split('\n')[0], /^NAME\s+STATUS\s+PROVIDER/, 'a header first');
    } finally {
      child.kill();
    }
  });

  it('a watch piped into head ends quietly when head has read enough', async () => {
    const poke = {
      policy: (i: number) =>
        `kind: Policy\nmetadata: { name: steady, labels: { tick: "${i}" } }\nspec: { type: location, locations: [{ name: eu }] }\n`,
      // A new spec is a new event, which `describe --watch` prints.
      model: (i: number) =>
        `kind: Model\nmetadata: { name: lonely }\nspec:\n  runtime: { type: openai, model: gpt-${i} }\n  integrationConnections: [claude]\n`,
    };
    for (const [args, input] of [
      [['get', 'policies', '--watch'], poke.policy],
      [['describe', 'model', 'lonely', '--watch'], poke.model],
    ] as const) {
      const child = spawn(
        'bash',
        [
          '-c',
          `"$0" "$1" "\${@:2}" | head -n 2 >/dev/null; echo "exit \${PIPESTATUS[0]}" >&2`,
          process.execPath,
          BIN,
          ...args,
        ],
        { env, cwd: dir },
      );
      let stderr = '';
      child.stderr.on('data', (d) => {
        stderr += d;
      });
      const done = new Promise((r) => child.on('close', r));
      // Once head is gone, the next change the watch prints meets a closed pipe.
      for (let i = 0; i < 40 && !/exit/.test(stderr); i++) {
        await new Promise((r) => setTimeout(r, 250));
        await ok(['apply', '-f', '-', '--no-wait'], { input: input(i) });
      }
      if (!/exit/.test(stderr)) child.kill();
      await done;
      assert.equal(stderr, 'exit 0\n', `${args.join(' ')}: quiet, status 0`);
    }
  });

  it('on a terminal the status is coloured, and NO_COLOR leaves no escape code at all', async () => {
    // script(1) gives the command a terminal; spawned, not spawnSync: the server answers from this very process.
    const onTty = (extra: Record<string, string>) =>
      new Promise<string>((resolve) => {
        const child = spawn(
          'script',
          ['-qec', `"${process.execPath}" "${BIN}" describe model lonely`, '/dev/null'],
          {
            env: { ...env, TERM: 'xterm-256color', ...extra },
          },
        );
        let out = '';
        child.stdout.on('data', (d) => {
          out += d;
        });
        child.on('close', () => resolve(out));
        child.stdin.end();
      });
    assert.ok((await onTty({})).includes(`${ESC}[31mFAILED`), 'FAILED in red');
    const plain = await onTty({ NO_COLOR: '1' });
    assert.match(plain, /FAILED/);
    assert.ok(!plain.includes(ESC), 'no escape code under NO_COLOR');
  });

  it('deploy refuses a berth.toml typo with the server’s did-you-mean, before anything is uploaded', async () => {
    const app = join(dir, 'typo-app');
    mkdirSync(app, { recursive: true });
    writeFileSync(join(app, 'main.py'), 'print("hi")\n');
    writeFileSync(join(app, 'berth.toml'), 'name = "typo"\n[runtime]\nmemroy = 256\n');
    const r = await berth(['deploy', app]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /berth\.toml: runtime\.memroy: is not a known field; did you mean "memory"\?/);
    assert.equal((await s.api('/agents/typo')).status, 404, 'nothing was created');
    writeFileSync(join(app, 'berth.toml'), 'name = "typo"\ntype = "agnet"\n');
    const t = await berth(['deploy', app]);
    assert.equal(t.code, 1);
    assert.match(t.stderr, /berth\.toml: type "agnet" is not one of agent, function \(or mcp\), job/);
  });

  it('a wrong credential exits 1 with the problem detail', async () => {
    const r = await berth(['get', 'policies'], { env: { BERTH_API_KEY: 'bk_wrong' } });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /berth: .+/);
    assert.doesNotMatch(r.stderr, /at .+\.js:\d+/, 'no stack trace');
  });
});
