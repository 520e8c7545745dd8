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
import { removeSandboxesIn, unmountVolumesIn } from '../../src/test-support/sandboxes.js';
import { OUTBOUND_LOOPBACK, startTestServer } from '../../src/test-support/server.js';
import { type GuideBlock, shellBlocks, substitute } from './guide-blocks.js';
import { holdRuntimeLock, RUNTIME_LOCK } from './runtime-lock.js';

const REPO = resolve(import.meta.dirname, '../../../..');
const GUIDES = [
  'README.md',
  ...readdirSync(join(REPO, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
];
/**
 * A whole guide, sandboxes included. On Node 20, run-tests.mjs's --test-timeout (120 s) bounds the whole
 * file, which is the real limit for all guides together.
 */
const GUIDE_TIMEOUT_MS = 100_000;
/**
 * How long to wait for another run's sandboxes to be done with the runtime lock before skipping the sandbox
 * blocks (under `flock /tmp/berth-runtime.lock` the test waits as long as flock does, before it starts).
 */
const LOCK_WAIT_S = 30;
const OUTPUT_TAIL_LINES = 60;
const isRoot = process.getuid?.() === 0;
const needsRuntime = (b: GuideBlock) => b.kind === 'sandboxes';

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

async function runGuide(guide: string, blocks: GuideBlock[], release: () => Promise<void>) {
  const home = mkdtempSync(join(tmpdir(), 'berth-docs-'));
  const dataDir = join(home, '.berth');
  const stops: (() => Promise<void>)[] = [
    release,
    async () => rmSync(home, { recursive: true, force: true }),
  ];
  try {
    const bin = join(home, 'bin');
    const work = join(home, 'work');
    mkdirSync(bin);
    mkdirSync(work);
    symlinkSync(join(REPO, 'packages/cli/bin/berth.mjs'), join(bin, 'berth'));
    const fake = await startFakeProvider();
    stops.unshift(() => fake.close());
    // The guides' connections point at the fake provider on loopback: opened for this server only.
    const server = await startTestServer({ BERTH_LOG_LEVEL: 'warn', ...OUTBOUND_LOOPBACK }, { dataDir });
    // Sandboxes outlive the server: remove those the guide left once it is down.
    stops.unshift(
      () => server.close(),
      () => removeSandboxesIn(dataDir),
      () => unmountVolumesIn(dataDir),
    );
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
    for (const stop of stops) await stop();
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

  // Guides without sandbox blocks first: they need no lock.
  const guides = GUIDES.map((guide) => ({ guide, all: shellBlocks(readFileSync(join(REPO, guide), 'utf8')) }))
    .filter(({ all }) => all.some((b) => b.kind !== 'skip'))
    .sort((a, b) => Number(a.all.some(needsRuntime)) - Number(b.all.some(needsRuntime)));
  for (const { guide, all } of guides) {
    const timeout = GUIDE_TIMEOUT_MS + LOCK_WAIT_S * 1000;
    it(`${guide}: its shell blocks succeed in order`, { timeout }, async (t) => {
      let release = async () => {};
      let why = isRoot ? '' : 'not root';
      if (isRoot && all.some(needsRuntime)) {
        const held = await holdRuntimeLock(LOCK_WAIT_S);
        if (held) release = held;
        else why = `${RUNTIME_LOCK} stayed busy for ${LOCK_WAIT_S} s (another run's sandboxes)`;
      }
      const left = why ? all.filter(needsRuntime) : [];
      const runnable = all.filter((b) => b.kind === 'run' || (needsRuntime(b) && !why));
      if (left.length)
        t.diagnostic(`${why}: skipped the sandbox blocks at lines ${left.map((b) => b.line).join(', ')}`);
      // A guide about sandboxes has one setup block and nothing to show without them.
      if (left.length > runnable.length) {
        await release();
        t.skip(`${why}: its blocks need sandboxes`);
        return;
      }
      await runGuide(guide, runnable, release);
    });
  }
});
