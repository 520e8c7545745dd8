// The catalog's MCP template deployed through Berth passes the MCP conformance suite's server scenarios that apply
// to it (it offers one tool: no resources, prompts, logging or completions), run against the gateway's URL. The
// suite needs Node >= 22: both are installed apart from the workspace (test/mcp-conformance, npm ci there).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { cpSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { seedNodeCache } from '../../src/test-support/dependency-cache.js';
import { berth } from '../berth-cli.js';
import { type SandboxServer, startSandboxServer } from '../sandboxes/support.js';

const REPO = join(import.meta.dirname, '../../../..');
const SUITE_DIR = join(import.meta.dirname, '../mcp-conformance');
const NODE22 = join(SUITE_DIR, 'node_modules/.bin/node');
const SUITE = join(SUITE_DIR, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
/** The scenarios a tools-only stateless server must pass. */
const SCENARIOS = ['server-initialize', 'ping', 'tools-list', 'tools-call-error'];
/** One scenario is a handful of requests; this bounds a hung one. */
const SCENARIO_TIMEOUT_MS = 60_000;
const installed = existsSync(NODE22) && existsSync(SUITE);

describe('MCP conformance of the template through the gateway', {
  skip: !installed && `run: (cd ${SUITE_DIR} && npm ci)`,
}, () => {
  let s: SandboxServer;
  let work: string;
  before(async () => {
    s = await startSandboxServer();
    work = mkdtempSync(join(tmpdir(), 'berth-mcp-conf-'));
  });
  after(async () => {
    await s.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('deploys the MCP template (public) with berth deploy', async () => {
    const dir = join(work, 'mcp-typescript');
    cpSync(join(REPO, 'templates/mcp-typescript'), dir, { recursive: true });
    // Public: the suite sends no credential.
    writeFileSync(
      join(dir, 'berth.toml'),
      'type = "function"\nname = "mcp-conf"\npublic = true\n[runtime]\nmemory = 512\n',
    );
    seedNodeCache(s.dataDir, 'default', dir, REPO);
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, 0, r.out);
  });

  for (const scenario of SCENARIOS)
    it(`passes ${scenario}`, async () => {
      // Asynchronous: the server under test answers from this very process.
      const r = await promisify(execFile)(
        NODE22,
        [SUITE, 'server', '--url', `${s.url}/run/default/functions/mcp-conf/mcp`, '--scenario', scenario],
        { encoding: 'utf8', timeout: SCENARIO_TIMEOUT_MS },
      ).catch((e: { code?: number; stdout?: string; stderr?: string }) =>
        assert.fail(`exit ${e.code}\n${e.stdout}\n${e.stderr}`),
      );
      assert.match(r.stdout, /, 0 failed/);
    });
});
