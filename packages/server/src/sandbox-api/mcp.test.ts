import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startSandboxDaemon, type TestDaemon } from '../test-support/sandbox-daemon.js';
import type { ProcessJson } from './schema.js';

let d: TestDaemon;
let client: Client;
before(async () => {
  d = await startSandboxDaemon();
  client = new Client({ name: 'berth-test', version: '0.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${d.url}/mcp`)));
});
after(async () => {
  await client.close();
  await d.close();
});

const text = (r: Awaited<ReturnType<Client['callTool']>>) =>
  (r.content as { type: string; text: string }[])[0].text;

describe('MCP over streamable HTTP', () => {
  test('tools/list names the process and filesystem tools', async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), [
      'fsDelete',
      'fsListDirectory',
      'fsReadFile',
      'fsWriteFile',
      'processExecute',
      'processGet',
      'processKill',
      'processList',
      'processLogs',
    ]);
    const exec = tools.find((t) => t.name === 'processExecute')!;
    assert.ok((exec.inputSchema.required as string[]).includes('command'));
  });

  test('processExecute runs a command and returns the finished process', async () => {
    const r = await client.callTool({
      name: 'processExecute',
      arguments: { command: 'echo from-mcp', name: 'mcp-echo' },
    });
    assert.notEqual(r.isError, true);
    const p = JSON.parse(text(r)) as ProcessJson;
    assert.equal(p.stdout, 'from-mcp\n');
    assert.equal(p.status, 'completed');
    const logs = await client.callTool({ name: 'processLogs', arguments: { identifier: 'mcp-echo' } });
    assert.equal(JSON.parse(text(logs)).stdout, 'from-mcp\n');
  });

  test('fs tools write, read, list and delete; errors come back as tool errors', async () => {
    const w = await client.callTool({
      name: 'fsWriteFile',
      arguments: { path: 'mcp/a.txt', content: 'via mcp' },
    });
    assert.notEqual(w.isError, true);
    assert.equal(readFileSync(join(d.root, 'mcp', 'a.txt'), 'utf8'), 'via mcp');
    const r = await client.callTool({ name: 'fsReadFile', arguments: { path: 'mcp/a.txt' } });
    assert.equal(text(r), 'via mcp');
    const ls = await client.callTool({ name: 'fsListDirectory', arguments: { path: 'mcp' } });
    assert.deepEqual(
      JSON.parse(text(ls)).files.map((f: { name: string }) => f.name),
      ['a.txt'],
    );
    const del = await client.callTool({ name: 'fsDelete', arguments: { path: 'mcp', recursive: true } });
    assert.notEqual(del.isError, true);
    const missing = await client.callTool({ name: 'fsReadFile', arguments: { path: 'mcp/a.txt' } });
    assert.equal(missing.isError, true);
    const outside = await client.callTool({ name: 'fsReadFile', arguments: { path: '/etc/passwd' } });
    assert.equal(outside.isError, true);
    assert.match(text(outside), /outside the sandbox root/);
  });
});
