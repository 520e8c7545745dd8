// An MCP client for an MCP server hosted on Berth (a function's `/mcp` address), as an MCP inspector connects: the
// official SDK over streamable HTTP, the session's key as Authorization. Loaded only when a try-it panel opens.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { workloadPath } from './client';
import { getSession } from './session';

export interface Tool {
  name: string;
  description?: string;
  inputSchema: { type?: string; properties?: Record<string, any>; required?: string[] };
}

export async function connect(fn: string): Promise<Client> {
  const s = getSession();
  const url = new URL(workloadPath('functions', fn, '/mcp'), location.origin);
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { authorization: `Bearer ${s?.key ?? ''}` } },
  });
  const client = new Client({ name: 'berth-console', version: '0.1.0' });
  await client.connect(transport);
  return client;
}
