// POST/GET/DELETE /mcp: the sandbox's own MCP server (streamable HTTP, stateless: a fresh server and transport
// per request), exposing the process and filesystem operations as tools. The MCP SDK and zod load on first use.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { SandboxApi } from './context.js';
import { removePath } from './fs/delete.js';
import { listDirectory } from './fs/entries.js';
import { readFileJson } from './fs/read.js';
import { writeText } from './fs/write.js';
import { fsError, HttpError, notFound } from './http.js';
import { launch } from './process/start.js';
import { buildSpec } from './process/spec.js';
import type { Handler } from './router.js';
import { checkProcessRequest, parsePermissions } from './schema.js';

type Modules = {
  McpServer: typeof import('@modelcontextprotocol/sdk/server/mcp.js').McpServer;
  Transport: typeof import('@modelcontextprotocol/sdk/server/streamableHttp.js').StreamableHTTPServerTransport;
  z: typeof import('zod');
};

let modules: Promise<Modules> | undefined;

function load(): Promise<Modules> {
  modules ??= Promise.all([
    import('@modelcontextprotocol/sdk/server/mcp.js'),
    import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
    import('zod'),
  ]).then(([mcp, http, z]) => ({
    McpServer: mcp.McpServer,
    Transport: http.StreamableHTTPServerTransport,
    z,
  }));
  return modules;
}

export function mcp(api: SandboxApi): Handler {
  return async ({ req, res }) => serve(api, req, res);
}

async function serve(api: SandboxApi, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const m = await load();
  const server = buildServer(m, api);
  const transport = new m.Transport({ sessionIdGenerator: undefined });
  res.once('close', () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res);
}

type ToolResult = { content: { type: 'text'; text: string }[]; isError?: boolean };

/** Runs a tool body; its value is answered as JSON text, a wire error as a tool error (not a protocol error). */
async function run(fn: () => Promise<unknown>): Promise<ToolResult> {
  try {
    const value = await fn();
    return {
      content: [{ type: 'text', text: typeof value === 'string' ? value : JSON.stringify(value, null, 2) }],
    };
  } catch (err) {
    const message =
      err instanceof HttpError ? err.message : `unexpected error: ${(err as Error)?.message ?? err}`;
    return { content: [{ type: 'text', text: message }], isError: true };
  }
}

function buildServer({ McpServer, z }: Modules, api: SandboxApi): McpServer {
  const server = new McpServer({ name: 'berth-sandbox', version: api.config.version });
  const identifier = { identifier: z.string().describe('Process id (pid) or name') };
  const find = (id: string) => {
    const p = api.processes.find(id);
    if (!p) throw notFound(`process ${id} not found`);
    return p;
  };

  server.registerTool(
    'processExecute',
    {
      description:
        'Run a shell command in the sandbox. By default waits for it to end and returns its output.',
      inputSchema: {
        command: z.string().describe('The command line, run by /bin/sh when it needs a shell'),
        name: z.string().optional().describe('A name to find the process by later'),
        workingDir: z.string().optional(),
        env: z.record(z.string(), z.string()).optional(),
        waitForCompletion: z.boolean().optional().describe('Wait for the process to end (default true)'),
        timeout: z.number().optional().describe('Seconds before the process is killed (0 = none)'),
        keepAlive: z.boolean().optional().describe('Keep the sandbox awake while it runs'),
      },
    },
    async (args) =>
      run(async () => {
        const check = checkProcessRequest(args);
        if (!check.ok) throw new HttpError(400, check.reason);
        const p = launch(api, await buildSpec(api, check.value));
        if (args.waitForCompletion !== false) await p.final;
        return p.toJson();
      }),
  );
  server.registerTool(
    'processGet',
    { description: 'A process started in the sandbox, by id or name.', inputSchema: identifier },
    async ({ identifier }) => run(async () => find(identifier).toJson()),
  );
  server.registerTool('processList', { description: 'Every process started in the sandbox.' }, async () =>
    run(async () => api.processes.list().map((p) => p.toJson())),
  );
  server.registerTool(
    'processLogs',
    { description: "A process's output: interleaved logs, stdout and stderr.", inputSchema: identifier },
    async ({ identifier }) =>
      run(async () => {
        const { logs } = find(identifier);
        return { logs: logs.text(), stdout: logs.text('stdout'), stderr: logs.text('stderr') };
      }),
  );
  server.registerTool(
    'processKill',
    { description: 'Kill a running process (SIGKILL to its process group).', inputSchema: identifier },
    async ({ identifier }) =>
      run(async () => {
        const p = find(identifier);
        return { message: p.kill() ? 'Process killed successfully' : `Process already ${p.status}` };
      }),
  );
  const path = z.string().describe('Absolute, ~-relative, or relative to the working directory');
  server.registerTool('fsReadFile', { description: 'Read a text file.', inputSchema: { path } }, async (a) =>
    run(async () => (await readFileJson(await api.paths.resolve(a.path))).content),
  );
  server.registerTool(
    'fsWriteFile',
    {
      description: 'Write a text file (parents are created).',
      inputSchema: {
        path,
        content: z.string(),
        permissions: z.string().optional().describe('Octal, e.g. "0644"'),
      },
    },
    async (a) =>
      run(async () => {
        const abs = await api.paths.resolve(a.path);
        const perm = parsePermissions(a.permissions);
        if (!perm.ok) throw new HttpError(400, perm.reason);
        await writeText(abs, a.content, perm.value).catch((err) => Promise.reject(fsError(err, abs)));
        return { message: 'File created/updated successfully', path: abs };
      }),
  );
  server.registerTool(
    'fsListDirectory',
    { description: 'List a directory: its files and subdirectories.', inputSchema: { path } },
    async (a) =>
      run(async () => {
        const abs = await api.paths.resolve(a.path);
        return listDirectory(abs).catch((err) => Promise.reject(fsError(err, abs)));
      }),
  );
  server.registerTool(
    'fsDelete',
    {
      description: 'Delete a file or directory (a non-empty directory only with recursive).',
      inputSchema: { path, recursive: z.boolean().optional() },
    },
    async (a) => run(async () => removePath(await api.paths.resolve(a.path), a.recursive === true)),
  );
  return server;
}
