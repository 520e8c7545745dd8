// Runs each starter template's own server as its README says (python3, node) on 127.0.0.1 and talks to it.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { DEFAULT_TEMPLATES_DIR } from './catalog.js';

interface Started {
  url: string;
  stop(): Promise<void>;
}

/** Starts a template server on a free port and waits for the address it prints. */
async function startTemplate(
  dir: string,
  cmd: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<Started> {
  const child: ChildProcess = spawn(cmd, args, {
    cwd: join(DEFAULT_TEMPLATES_DIR, dir),
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (c: Buffer) => {
      output += c.toString();
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (m) resolve(m[1]);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (c: Buffer) => {
      output += c.toString();
    });
    child.once('exit', (code) =>
      reject(new Error(`${cmd} exited with ${code} before listening:\n${output}`)),
    );
  });
  return {
    url,
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

async function postInputs(url: string, inputs: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ inputs }),
  });
  return { status: res.status, body: (await res.json()) as any };
}

async function agentBehaves(agent: Started) {
  const first = await postInputs(`${agent.url}/`, 'hello berth');
  assert.equal(first.status, 200);
  assert.deepEqual(first.body, { output: 'HELLO BERTH', inputs: 'hello berth', turn: 1, previous: null });

  const t1 = await postInputs(`${agent.url}/`, 'one', { 'X-Blaxel-Thread-Id': 'th-1' });
  const t2 = await postInputs(`${agent.url}/`, 'two', { 'X-Service-Thread-Id': 'th-1' });
  assert.equal(t1.body.turn, 1);
  assert.deepEqual({ turn: t2.body.turn, previous: t2.body.previous }, { turn: 2, previous: 'one' });
  const noThread = await postInputs(`${agent.url}/`, 'three');
  assert.equal(noThread.body.turn, 1, 'without a thread id the agent keeps no memory');

  const bad = await postInputs(`${agent.url}/`, 42);
  assert.equal(bad.status, 400);
  assert.match(bad.body.error, /inputs/);
  const health = await fetch(`${agent.url}/health`);
  assert.deepEqual(await health.json(), { status: 'ok' });
}

test('the python agent template answers POST / with JSON and keeps memory per thread', async () => {
  const agent = await startTemplate('agent-python', 'python3', ['main.py']);
  try {
    await agentBehaves(agent);
  } finally {
    await agent.stop();
  }
});

test('the TypeScript agent template answers POST / with JSON and keeps memory per thread', async () => {
  const agent = await startTemplate('agent-typescript', process.execPath, [
    '--import',
    'tsx',
    'src/index.ts',
  ]);
  try {
    await agentBehaves(agent);
  } finally {
    await agent.stop();
  }
});

test('REPLY_STYLE=echo makes both agent templates answer the inputs unchanged', async () => {
  const agents = await Promise.all([
    startTemplate('agent-python', 'python3', ['main.py'], { REPLY_STYLE: 'echo' }),
    startTemplate('agent-typescript', process.execPath, ['--import', 'tsx', 'src/index.ts'], {
      REPLY_STYLE: 'echo',
    }),
  ]);
  try {
    for (const a of agents) assert.equal((await postInputs(`${a.url}/`, 'Hello')).body.output, 'Hello');
  } finally {
    await Promise.all(agents.map((a) => a.stop()));
  }
});

test('the MCP template serves its tool over streamable HTTP to the official client', async () => {
  const server = await startTemplate('mcp-typescript', process.execPath, ['--import', 'tsx', 'src/index.ts']);
  const client = new Client({ name: 'berth-test', version: '0.0.0' });
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)));
    const { tools } = await client.listTools();
    assert.deepEqual(
      tools.map((t) => t.name),
      ['text_stats'],
    );
    const r: any = await client.callTool({ name: 'text_stats', arguments: { text: 'two words\nand more' } });
    assert.deepEqual(r.structuredContent, { characters: 18, words: 4, lines: 2 });
  } finally {
    await client.close();
    await server.stop();
  }
});

test('the mail MCP template sends as the connected user with the token in its file, read at each call', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-mcp-mail-'));
  const tokenFile = join(dir, 'access_token');
  writeFileSync(tokenFile, 'token-one');
  const seen: { auth?: string; path?: string; raw?: string }[] = [];
  const api = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => {
      body += d;
    });
    req.on('end', () => {
      seen.push({ auth: req.headers.authorization, path: req.url, raw: body && JSON.parse(body).raw });
      res.setHeader('content-type', 'application/json');
      res.end(
        req.url?.endsWith('/profile')
          ? '{"emailAddress":"alice@example.test"}'
          : '{"id":"m1","threadId":"t1"}',
      );
    });
  });
  await new Promise<void>((r) => api.listen(0, '127.0.0.1', () => r()));
  const server = await startTemplate('mcp-mail', process.execPath, ['--import', 'tsx', 'src/index.ts'], {
    BL_CONNECTION_MAIL_ALICE_TOKEN_FILE: tokenFile,
    BL_CONNECTION_MAIL_ALICE_API_BASE_URL: `http://127.0.0.1:${(api.address() as { port: number }).port}`,
  });
  const client = new Client({ name: 'berth-test', version: '0.0.0' });
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)));
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ['send_mail', 'whoami']);
    const me: any = await client.callTool({ name: 'whoami', arguments: {} });
    assert.deepEqual(me.structuredContent, { emailAddress: 'alice@example.test' });
    writeFileSync(tokenFile, 'token-two'); // Berth refreshed it
    const sent: any = await client.callTool({
      name: 'send_mail',
      arguments: { to: 'bob@example.test', subject: 'Héllo', text: 'from my agent' },
    });
    assert.deepEqual(sent.structuredContent, { id: 'm1', threadId: 't1' });
    assert.deepEqual(
      seen.map((x) => [x.auth, x.path]),
      [
        ['Bearer token-one', '/gmail/v1/users/me/profile'],
        ['Bearer token-two', '/gmail/v1/users/me/messages/send'],
      ],
    );
    const mime = Buffer.from(seen[1].raw ?? '', 'base64url').toString();
    assert.match(mime, /^To: bob@example.test\r\nSubject: =\?UTF-8\?B\?SMOpbGxv\?=\r\n/);
    assert.match(mime, /\r\n\r\nfrom my agent$/);
  } finally {
    await client.close();
    await server.stop();
    api.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
