// The catalog's TypeScript templates deployed with `berth deploy` and built with no network (their dependencies
// come from the workspace's dependency cache, keyed by the lockfile): the MCP template answers the official MCP
// SDK client and the unmodified @blaxel/core (its MCP helper), the agent template answers blAgent(name).run().
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { runBlaxelScript } from '../../src/test-support/blaxel.js';
import { seedNodeCache } from '../../src/test-support/dependency-cache.js';
import { type SandboxServer, startSandboxServer } from '../sandboxes/support.js';
import { berth } from '../berth-cli.js';

const REPO = join(import.meta.dirname, '../../../..');
const TEMPLATES = join(REPO, 'templates');
const SDK_SCRIPT = join(import.meta.dirname, 'blaxel-workloads.mjs');

describe('TypeScript templates built offline from the dependency cache', () => {
  let s: SandboxServer;
  let work: string;
  before(async () => {
    s = await startSandboxServer();
    work = mkdtempSync(join(tmpdir(), 'berth-mcp-'));
  });
  after(async () => {
    await s.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('the MCP template deploys as a function and answers the official MCP client through the gateway', async () => {
    const dir = join(work, 'mcp-typescript');
    cpSync(join(TEMPLATES, 'mcp-typescript'), dir, { recursive: true });
    seedNodeCache(s.dataDir, 'default', dir, REPO);
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, 0, r.out);
    assert.match(
      r.stdout,
      /\/run\/default\/functions\/mcp-typescript\/mcp\n$/,
      'the MCP address, /mcp included',
    );
    const log = await (await s.api('/functions/mcp-typescript/revisions/latest/logs')).text();
    assert.match(log, /dependency cache hit/);
    const client = new Client({ name: 'test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${s.url}/run/default/functions/mcp-typescript/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${s.adminKey}` } },
      }),
    );
    const tools = await client.listTools();
    assert.deepEqual(
      tools.tools.map((t) => t.name),
      ['text_stats'],
    );
    const called = await client.callTool({ name: 'text_stats', arguments: { text: 'one two\nthree' } });
    assert.deepEqual(called.structuredContent, { characters: 13, words: 3, lines: 2 });
    await client.close();

    const stdout = await runBlaxelScript(SDK_SCRIPT, s, { FUNCTION_NAME: 'mcp-typescript' });
    const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
    assert.ok(line, stdout);
    assert.deepEqual(JSON.parse(line.slice('RESULT '.length)).tools, ['text_stats']);
  });

  it('the TypeScript agent template builds with tsc from the cache and answers blAgent(name).run()', async () => {
    const dir = join(work, 'agent-typescript');
    cpSync(join(TEMPLATES, 'agent-typescript'), dir, { recursive: true });
    seedNodeCache(s.dataDir, 'default', dir, REPO);
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, 0, r.out);
    const stdout = await runBlaxelScript(SDK_SCRIPT, s, { AGENT_NAME: 'agent-typescript' });
    const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
    assert.ok(line, stdout);
    const res = JSON.parse(line.slice('RESULT '.length)).agent;
    const body = typeof res === 'string' ? JSON.parse(res) : res;
    assert.equal(body.output, 'FROM THE SDK');
  });
});
