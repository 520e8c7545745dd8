// The guides run as written: every ```sh block of README.md and docs/*.md, in order, in one bash session
// against a fresh server (its own port, data dir and HOME, so `~/.berth/admin.key` is its admin key), with
// `berth` on the PATH and KEY set. The test only points http://127.0.0.1:8080 at that server and the
// openai/anthropic connections at a fake provider on loopback (guide-blocks.ts), and makes curl fail on an
// HTTP error status, so a 409 or a 404 in a guide fails it. Blocks marked `docs-test: skip` are not run;
// blocks marked `docs-test: sandboxes` run as root under the runtime lock, and are skipped otherwise.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { startFakeProvider } from '../../src/test-support/fake-provider.js';
import { removeSandboxesIn } from '../../src/test-support/sandboxes.js';
import { startTestServer } from '../../src/test-support/server.js';
import { type GuideBlock, shellBlocks, substitute } from './guide-blocks.js';
import { holdRuntimeLock } from './runtime-lock.js';

const REPO = resolve(import.meta.dirname, '../../../..');
const GUIDES = [
  'README.md',
  ...readdirSync(join(REPO, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
];
/** A whole guide, sandboxes included, on a loaded two-core host; waiting for the runtime lock comes on top. */
const GUIDE_TIMEOUT_MS = 5 * 60_000;
/** Another run may hold the runtime lock for its whole sandbox suite. */
const LOCK_WAIT_MS = 20 * 60_000;
const OUTPUT_TAIL_LINES = 60;
const isRoot = process.getuid?.() === 0;

interface RunResult {
  code: number | null;
  output: string;
}

/** Runs `script` with bash in its own process group; kills the group (background jobs too) when done. */
function runBash(script: string, cwd: string, env: Record<string, string>): Promise<RunResult> {
  return new Promise((done) => {
    const child = spawn('bash', ['-c', script], {
      cwd,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c) => {
      output += c;
    });
    child.stderr.on('data', (c) => {
      output += c;
    });
    const killGroup = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {}
    };
    const timer = setTimeout(() => {
      output += `\n[docs-test] timed out after ${GUIDE_TIMEOUT_MS} ms\n`;
      killGroup();
    }, GUIDE_TIMEOUT_MS);
    child.on('close', (code) => {
      clearTimeout(timer);
      killGroup();
      done({ code, output });
    });
  });
}

function script(blocks: GuideBlock[], guide: string, urls: { serverUrl: string; providerUrl: string }) {
  const parts = [
    'exec 2>&1',
    'set -eo pipefail',
    // A guide's curl answering 4xx/5xx is a broken guide, not output to read past.
    'curl() { command curl --fail-with-body "$@"; }',
  ];
  for (const b of blocks) {
    parts.push(`printf '\\n[docs-test] %s:%d\\n' ${JSON.stringify(guide)} ${b.line}`);
    parts.push(substitute(b.code, urls));
  }
  return `${parts.join('\n')}\n`;
}

function failure(guide: string, blocks: GuideBlock[], r: RunResult): string {
  const marks = [...r.output.matchAll(/\[docs-test\] \S+:(\d+)\n/g)];
  const line = Number(marks.at(-1)?.[1]);
  const block = blocks.find((b) => b.line === line);
  const tail = r.output.split('\n').slice(-OUTPUT_TAIL_LINES).join('\n');
  return [
    `${guide}:${line || '?'}: the block failed (bash exit ${r.code})`,
    '--- the block ---',
    block?.code ?? '(none reached)',
    `--- output (last ${OUTPUT_TAIL_LINES} lines) ---`,
    tail,
  ].join('\n');
}

async function runGuide(guide: string, blocks: GuideBlock[]) {
  const home = mkdtempSync(join(tmpdir(), 'berth-docs-'));
  const bin = join(home, 'bin');
  mkdirSync(bin);
  symlinkSync(join(REPO, 'packages/cli/bin/berth.mjs'), join(bin, 'berth'));
  const dataDir = join(home, '.berth');
  const sandboxes = blocks.some((b) => b.kind === 'sandboxes');
  const release = sandboxes ? await holdRuntimeLock() : async () => {};
  const fake = await startFakeProvider();
  try {
    const server = await startTestServer({ BERTH_LOG_LEVEL: 'warn' }, { dataDir });
    try {
      const work = join(home, 'work');
      mkdirSync(work);
      const env = {
        PATH: `${bin}:${process.env.PATH}`,
        HOME: home,
        KEY: server.adminKey,
        TMPDIR: tmpdir(),
        LANG: 'C.UTF-8',
      };
      const code = script(blocks, guide, { serverUrl: server.url, providerUrl: fake.url });
      writeFileSync(join(home, 'guide.sh'), code);
      const r = await runBash(code, work, env);
      assert.equal(r.code, 0, failure(guide, blocks, r));
    } finally {
      await server.close();
      await removeSandboxesIn(dataDir);
    }
  } finally {
    await fake.close();
    await release();
    rmSync(home, { recursive: true, force: true });
  }
}

describe('the guides run as written against a fresh server', () => {
  it('reads the ```sh blocks of a guide in order, with their docs-test markers', () => {
    const md = [
      '```sh',
      'echo one',
      '```',
      '<!-- docs-test: skip (starts the server) -->',
      '```sh',
      'berth serve',
      '```',
      '```js',
      'ignored()',
      '```',
      '<!-- docs-test: sandboxes -->',
      '```bash',
      'berth sandbox create box',
      '```',
    ].join('\n');
    assert.deepEqual(
      shellBlocks(md).map((b) => [b.line, b.kind, b.reason, b.code]),
      [
        [1, 'run', undefined, 'echo one'],
        [5, 'skip', 'starts the server', 'berth serve'],
        [12, 'sandboxes', undefined, 'berth sandbox create box'],
      ],
    );
  });

  for (const guide of GUIDES) {
    const all = shellBlocks(readFileSync(join(REPO, guide), 'utf8'));
    const runnable = all.filter((b) => b.kind === 'run' || (b.kind === 'sandboxes' && isRoot));
    if (!all.some((b) => b.kind !== 'skip')) continue;
    const needsLock = runnable.some((b) => b.kind === 'sandboxes');
    it(`${guide}: its shell blocks succeed in order`, {
      timeout: GUIDE_TIMEOUT_MS + (needsLock ? LOCK_WAIT_MS : 0) + 60_000,
    }, async (t) => {
      const left = all.filter((b) => b.kind === 'sandboxes' && !isRoot);
      if (left.length)
        t.diagnostic(`not root: skipped the sandbox blocks at lines ${left.map((b) => b.line).join(', ')}`);
      if (!runnable.some((b) => b.kind === 'run' || b.kind === 'sandboxes')) {
        t.skip('every block needs sandboxes, which need root');
        return;
      }
      await runGuide(guide, runnable);
    });
  }
});
