// A minimal MCP server for Berth: one tool over the streamable HTTP transport at /mcp.
// Stateless: every request gets a fresh server and transport, so any replica can answer any request.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

/** Largest request body accepted, in bytes. */
const MAX_BODY_BYTES = 1024 * 1024;

/** The tools this server offers: replace `text_stats` with yours. */
function buildServer(): McpServer {
  const server = new McpServer({ name: 'mcp-typescript', version: '0.1.0' });
  server.registerTool(
    'text_stats',
    {
      title: 'Text statistics',
      description: 'Counts the characters, words and lines of a text.',
      inputSchema: { text: z.string().describe('the text to measure') },
    },
    async ({ text }) => {
      const stats = {
        characters: [...text].length,
        words: text.split(/\s+/).filter(Boolean).length,
        lines: text === '' ? 0 : text.split('\n').length,
      };
      return { content: [{ type: 'text', text: JSON.stringify(stats) }], structuredContent: stats };
    },
  );
  return server;
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new Error('body too large');
    chunks.push(c as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? JSON.parse(text) : undefined;
}

function rpcError(res: ServerResponse, status: number, message: string) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
}

const http = createServer(async (req, res) => {
  const path = (req.url ?? '/').split('?')[0];
  if (req.method === 'GET' && path === '/health') {
    res.writeHead(200, { 'content-type': 'application/json' });
    return res.end('{"status":"ok"}');
  }
  if (path !== '/mcp') return rpcError(res, 404, 'not found: the MCP endpoint is /mcp');
  // Stateless servers have no stream to resume and no session to end.
  if (req.method !== 'POST') return rpcError(res, 405, 'method not allowed');
  let body: unknown;
  try {
    body = await readJson(req);
  } catch (e) {
    return rpcError(res, 400, `invalid request body: ${(e as Error).message}`);
  }
  const server = buildServer();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on('close', () => {
    void transport.close();
    void server.close();
  });
  try {
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  } catch (e) {
    if (!res.headersSent) rpcError(res, 500, `internal error: ${(e as Error).message}`);
  }
});

const host = process.env.HOST ?? '0.0.0.0';
const port = Number(process.env.PORT ?? 8000);
http.listen(port, host, () => {
  const addr = http.address();
  const actual = typeof addr === 'object' && addr ? addr.port : port;
  console.log(`MCP server listening on http://${host}:${actual}/mcp`);
});

const stop = () => http.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
