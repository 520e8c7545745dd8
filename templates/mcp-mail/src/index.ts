// An MCP server that sends mail as the end user who connected their account. Bound to an OAuth2 integration
// connection, it never sees the user's refresh token: Berth keeps a fresh access token in the file named by
// BL_CONNECTION_<CONNECTION>_TOKEN_FILE (and, for the API hosts the connection names, puts it on requests itself).
// The mail API is Gmail's (users.messages.send with a raw RFC 2822 message); any API taking a bearer token works alike.
// Stateless: every request gets a fresh server and transport, so any replica can answer any request.
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

/** Largest request body accepted, in bytes. */
const MAX_BODY_BYTES = 1024 * 1024;
/** A mail API call that has not answered within this long fails the tool call. */
const API_TIMEOUT_MS = 15_000;
const DEFAULT_API_BASE = 'https://gmail.googleapis.com';

/** The connection this server acts through: MAIL_CONNECTION, else the only OAuth2 connection bound. */
function connection(): { tokenFile: string; apiBase: string } {
  const wanted = process.env.MAIL_CONNECTION?.toUpperCase().replace(/[^A-Z0-9]+/g, '_');
  const files = Object.keys(process.env).filter((k) => /^BL_CONNECTION_.+_TOKEN_FILE$/.test(k));
  const key = wanted ? `BL_CONNECTION_${wanted}_TOKEN_FILE` : files.length === 1 ? files[0] : undefined;
  const tokenFile = key && process.env[key];
  if (!tokenFile)
    throw new Error(
      files.length
        ? `several OAuth2 connections are bound (${files.join(', ')}): set MAIL_CONNECTION to one`
        : 'no OAuth2 integration connection is bound to this MCP server (spec.integrationConnections)',
    );
  const prefix = key.slice(0, -'TOKEN_FILE'.length);
  return {
    tokenFile,
    apiBase: (process.env[`${prefix}API_BASE_URL`] ?? DEFAULT_API_BASE).replace(/\/+$/, ''),
  };
}

/** Calls the mail API as the user: the token is read at each call, so a refresh by Berth is seen at once. */
async function mailApi(path: string, init: { method?: string; body?: unknown } = {}): Promise<any> {
  const c = connection();
  const token = readFileSync(c.tokenFile, 'utf8').trim();
  const res = await fetch(`${c.apiBase}${path}`, {
    method: init.method ?? 'GET',
    headers: {
      authorization: `Bearer ${token}`,
      ...(init.body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    body: init.body !== undefined ? JSON.stringify(init.body) : undefined,
    signal: AbortSignal.timeout(API_TIMEOUT_MS),
  });
  const text = await res.text();
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  if (!res.ok)
    throw new Error(
      `the mail API answered ${res.status}: ${body?.error?.message ?? (text.slice(0, 200) || res.statusText)}`,
    );
  return body;
}

/** An RFC 2822 message, base64url-encoded as Gmail's `raw` wants it. The API sets From to the user. */
function rawMessage(to: string, subject: string, text: string): string {
  const header = (s: string) => s.replace(/[\r\n]+/g, ' ');
  const encodedSubject = `=?UTF-8?B?${Buffer.from(header(subject)).toString('base64')}?=`;
  const mime = [
    `To: ${header(to)}`,
    `Subject: ${encodedSubject}`,
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=UTF-8',
    '',
    text,
  ].join('\r\n');
  return Buffer.from(mime).toString('base64url');
}

/** A failed call as the tool's answer, with its cause (fetch says only "fetch failed"). */
const failure = (e: unknown) => {
  const cause = (e as { cause?: { message?: string; code?: string } }).cause;
  const why = cause ? `: ${cause.code ?? ''} ${cause.message ?? ''}`.trimEnd() : '';
  return { content: [{ type: 'text' as const, text: `${(e as Error).message}${why}` }], isError: true };
};

function buildServer(): McpServer {
  const server = new McpServer({ name: 'mcp-mail', version: '0.1.0' });
  server.registerTool(
    'send_mail',
    {
      title: 'Send mail',
      description: 'Sends a plain-text mail from the connected user.',
      inputSchema: {
        to: z.string().describe('recipient address'),
        subject: z.string().describe('subject line'),
        text: z.string().describe('plain-text body'),
      },
    },
    async ({ to, subject, text }) => {
      try {
        const sent = await mailApi('/gmail/v1/users/me/messages/send', {
          method: 'POST',
          body: { raw: rawMessage(to, subject, text) },
        });
        const out = { id: String(sent.id ?? ''), threadId: String(sent.threadId ?? '') };
        return { content: [{ type: 'text', text: `sent (id ${out.id})` }], structuredContent: out };
      } catch (e) {
        return failure(e);
      }
    },
  );
  server.registerTool(
    'whoami',
    {
      title: 'Who am I',
      description: 'The address mail is sent from: the connected user.',
      inputSchema: {},
    },
    async () => {
      try {
        const p = await mailApi('/gmail/v1/users/me/profile');
        const out = { emailAddress: String(p.emailAddress ?? '') };
        return { content: [{ type: 'text', text: out.emailAddress }], structuredContent: out };
      } catch (e) {
        return failure(e);
      }
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
  console.log(`MCP mail server listening on http://${host}:${actual}/mcp`);
});

const stop = () => http.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
