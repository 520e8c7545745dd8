// Run by tokenizer-worker.test.ts in a process of its own: starts a Berth server, makes one budgeted call against
// the test's fake provider, and prints which gpt-tokenizer modules this (main) thread loaded, whether as ES
// modules (seen by a resolve hook) or through require (the CommonJS cache). Closes the server and lets the
// process end by itself: a handle left open (the tokenizer's thread among them) would keep it running.
import { createRequire, register } from 'node:module';
import { MessageChannel } from 'node:worker_threads';

const resolved: string[] = [];
const { port1, port2 } = new MessageChannel();
port1.on('message', (url: string) => resolved.push(url));
port1.unref();
// Every ES module this thread resolves from now on is posted here (the hook runs on the loader's own thread).
const hook = `export async function initialize({ port }) { globalThis.port = port; }
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  globalThis.port.postMessage(r.url);
  return r;
}`;
register(`data:text/javascript,${encodeURIComponent(hook)}`, {
  data: { port: port2 },
  transferList: [port2],
});

const { startTestServer, OUTBOUND_LOOPBACK } = await import('../../src/test-support/server.js');
const { tokenCounter } = await import('../../src/models/token-counter.js');

// Texts asked of the tokenizer's thread.
const asked: string[] = [];
const count = tokenCounter.count.bind(tokenCounter);
tokenCounter.count = (texts: string[]) => {
  asked.push(...texts);
  return count(texts);
};

const server = await startTestServer(OUTBOUND_LOOPBACK);
let status = 0;
try {
  const post = async (path: string, json: unknown) => {
    const r = await server.api(path, { method: 'POST', json });
    if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  };
  await post('/integrations/connections', {
    metadata: { name: 'oa' },
    spec: {
      integration: 'openai',
      config: { baseUrl: process.env.FAKE_URL },
      secret: { apiKey: process.env.FAKE_KEY },
    },
  });
  await post('/policies', {
    metadata: { name: 'budget' },
    spec: { type: 'maxToken', maxTokens: { total: 100_000, granularity: 'day' } },
  });
  await post('/models', {
    metadata: { name: 'm' },
    spec: {
      integrationConnections: ['oa'],
      policies: ['budget'],
      runtime: { type: 'openai', model: 'gpt-4o-mini' },
    },
  });
  for (let i = 0; i < 400; i++) {
    const m: any = await (await server.api('/models/m')).json();
    if (m.status === 'DEPLOYED') break;
    await new Promise((r) => setTimeout(r, 25));
  }
  const res = await fetch(`${server.url}/run/default/models/m/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      messages: [{ role: 'user', content: 'Count me on the tokenizer’s thread <|endoftext|>' }],
    }),
  });
  status = res.status;
  await res.text();
} finally {
  await server.close();
}
// Let the loader's thread deliver what it resolved before reading it.
await new Promise((r) => setTimeout(r, 50));
const cjs = Object.keys(createRequire(import.meta.url).cache);
const tokenizerModules = [...resolved, ...cjs].filter((u) => u.includes('gpt-tokenizer'));
const countedOnThread = asked.some((t) => t.startsWith('Count me'));
console.log(JSON.stringify({ status, countedOnThread, tokenizerModules, modulesSeen: resolved.length }));
