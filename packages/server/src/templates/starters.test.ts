// Runs each starter template's own server as its README says (python3, node) on 127.0.0.1 and talks to it.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
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
