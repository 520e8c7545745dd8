// A fake LLM provider on 127.0.0.1 speaking OpenAI's, Anthropic's and Gemini's real wire formats
// (fake-openai.ts, fake-anthropic.ts, fake-gemini.ts). It records every request, checks the provider key,
// and can be told to fail, hang or pace its streams; a user message containing `[status NNN]` makes it
// answer that error, one containing `[length N]` makes it write N tokens when the request sets no limit.
// Run directly (`node --import tsx fake-provider.ts`) it prints `listening <url>` (used by the benchmark).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { anthropicError, anthropicModels, messages } from './fake-anthropic.js';
import { GEMINI_PATH, generateContent } from './fake-gemini.js';
import { chatCompletions, embeddings, openaiError, openaiModels, responses } from './fake-openai.js';
import type { StreamContext } from './fake-wire.js';

export interface FakeRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
}

export interface FakeProviderOptions {
  /** The key callers must present (Bearer for OpenAI paths, x-api-key for Anthropic); absent = any. */
  key?: string;
  /** Delay between streamed chunks. */
  chunkDelayMs?: number;
  /**
   * Keep every request in `requests` (default). Run on its own (the benchmark) it keeps none: a run of a few
   * hundred thousand calls held every body and header set, each of them survived the fake's scavenges (copied,
   * then promoted), and those longer pauses were in every path's p99, the direct one's too (decision 088).
   */
  record?: boolean;
}

export interface FakeProvider {
  url: string;
  requests: FakeRequest[];
  /** The next `times` calls answer `status` ('reset' closes the socket, 'hang' never answers). */
  fail(status: number | 'reset' | 'hang', times?: number): void;
  set chunkDelayMs(ms: number);
  /** Resolves once a streamed answer was cut by the client (for cancellation tests). */
  nextCancel(): Promise<void>;
  close(): Promise<void>;
}

export async function startFakeProvider(opts: FakeProviderOptions = {}): Promise<FakeProvider> {
  const requests: FakeRequest[] = [];
  const failures: (number | 'reset' | 'hang')[] = [];
  const hanging = new Set<ServerResponse>();
  let cancelWaiters: (() => void)[] = [];
  const ctx: StreamContext = {
    chunkDelayMs: opts.chunkDelayMs ?? 0,
    onCancel() {
      for (const w of cancelWaiters) w();
      cancelWaiters = [];
    },
  };

  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    let body: any;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      body = raw;
    }
    const path = (req.url ?? '/').split('?')[0];
    if (opts.record !== false)
      requests.push({ method: req.method ?? 'GET', path, headers: req.headers, body });
    const anthropicStyle = path === '/v1/messages' || req.headers['anthropic-version'] !== undefined;
    const fail = anthropicStyle ? anthropicError : openaiError;
    const presented = anthropicStyle
      ? req.headers['x-api-key']
      : /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    // Real providers echo (part of) a wrong key: the gateway must not pass it on.
    if (opts.key && presented !== opts.key) return fail(res, 401, `Incorrect API key provided: ${presented}`);
    const f = failures.shift();
    if (f === 'hang') return void hanging.add(res);
    if (f === 'reset') return req.socket.destroy();
    if (typeof f === 'number') return fail(res, f, `fake failure ${f}`);
    const asked = /\[status (\d{3})\]/.exec(JSON.stringify(body?.messages ?? body?.input ?? ''));
    if (asked) return fail(res, Number(asked[1]), `fake error ${asked[1]} as asked`);
    if (req.method === 'GET' && path === '/v1/models')
      return anthropicStyle ? anthropicModels(res) : openaiModels(res);
    if (req.method === 'POST' && path === '/v1/chat/completions') return chatCompletions(ctx, res, body);
    if (req.method === 'POST' && path === '/v1/messages') return messages(ctx, res, body);
    if (req.method === 'POST' && path === '/v1/embeddings') return embeddings(res, body);
    if (req.method === 'POST' && path === '/v1/responses') return responses(res, body);
    const gemini = GEMINI_PATH.exec(path);
    if (req.method === 'POST' && gemini)
      return generateContent(ctx, res, gemini[1], gemini[2] === 'streamGenerateContent', body);
    return fail(res, 404, `no route ${req.method} ${path}`);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    fail(status, times = 1) {
      for (let i = 0; i < times; i++) failures.push(status);
    },
    set chunkDelayMs(ms: number) {
      ctx.chunkDelayMs = ms;
    },
    nextCancel: () => new Promise<void>((r) => cancelWaiters.push(r)),
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const fake = await startFakeProvider({
    chunkDelayMs: Number(process.env.FAKE_CHUNK_DELAY_MS ?? 0),
    // FAKE_RECORD=1 keeps every request as before 088, to measure what that cost the benchmark.
    record: process.env.FAKE_RECORD === '1',
  });
  process.stdout.write(`listening ${fake.url}\n`);
  process.on('SIGTERM', () => fake.close().then(() => process.exit(0)));
}
