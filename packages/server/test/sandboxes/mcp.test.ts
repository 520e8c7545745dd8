// The sandbox's MCP server through the gateway, with the official MCP SDK client over streamable HTTP.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type SandboxServer, startSandboxServer } from './support.js';

let s: SandboxServer;
before(async () => {
  s = await startSandboxServer();
});
after(() => s.close());

test('an MCP client lists the sandbox tools and runs a command through <metadata.url>/mcp', async () => {
  const sb = await s.create('mcp-box');
  const transport = new StreamableHTTPClientTransport(new URL(`${sb.metadata.url}/mcp`), {
    requestInit: { headers: { 'x-blaxel-authorization': `Bearer ${s.adminKey}` } },
  });
  const client = new Client({ name: 'berth-test', version: '1.0.0' });
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const n of ['processExecute', 'fsReadFile', 'fsWriteFile'])
      assert.ok(names.includes(n), `${n} in ${names}`);
    const r: any = await client.callTool({ name: 'processExecute', arguments: { command: 'echo from-mcp' } });
    assert.notEqual(r.isError, true, JSON.stringify(r));
    const proc = JSON.parse(r.content[0].text);
    assert.equal(proc.exitCode, 0);
    assert.equal(proc.stdout, 'from-mcp\n');
  } finally {
    await client.close();
  }
  const anonymous = await fetch(`${sb.metadata.url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
  assert.equal(anonymous.status, 401);
});
