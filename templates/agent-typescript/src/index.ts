// A minimal Berth agent: POST / with {"inputs": "..."} answers JSON. It keeps a short memory per
// conversation when the caller sends a thread id header, and none without one.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';

/** Turns remembered per thread; older ones are forgotten so memory stays bounded. */
const MAX_TURNS_PER_THREAD = 20;
/** Largest request body accepted, in bytes. */
const MAX_BODY_BYTES = 1024 * 1024;

/** `upper` answers the inputs in capitals, `echo` unchanged (the template's one variable). */
const REPLY_STYLE = process.env.REPLY_STYLE === 'echo' ? 'echo' : 'upper';

const threads = new Map<string, string[]>();

function send(res: ServerResponse, status: number, body: unknown) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new Error('body too large');
    chunks.push(c as Buffer);
  }
  return JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
}

function threadId(req: IncomingMessage): string | undefined {
  const v =
    req.headers['x-blaxel-thread-id'] ?? req.headers['x-service-thread-id'] ?? req.headers['thread-id'];
  return Array.isArray(v) ? v[0] : v;
}

/** The agent's logic: replace it with yours. */
function answer(inputs: string, history: string[]) {
  return {
    output: REPLY_STYLE === 'echo' ? inputs : inputs.toUpperCase(),
    inputs,
    turn: history.length + 1,
    previous: history.at(-1) ?? null,
  };
}

const server = createServer(async (req, res) => {
  if (req.method === 'GET' && req.url === '/health') return send(res, 200, { status: 'ok' });
  if (req.method !== 'POST' || (req.url !== '/' && req.url !== ''))
    return send(res, 404, { error: 'not found' });
  let body: any;
  try {
    body = await readJson(req);
  } catch (e) {
    return send(res, 400, { error: `invalid request body: ${(e as Error).message}` });
  }
  if (typeof body?.inputs !== 'string') return send(res, 400, { error: 'body must be {"inputs": "<text>"}' });
  const id = threadId(req);
  const history = id ? (threads.get(id) ?? []) : [];
  const out = answer(body.inputs, history);
  if (id) threads.set(id, [...history, body.inputs].slice(-MAX_TURNS_PER_THREAD));
  send(res, 200, out);
});

const host = process.env.HOST ?? '0.0.0.0';
const port = Number(process.env.PORT ?? 8000);
server.listen(port, host, () => {
  const addr = server.address();
  const actual = typeof addr === 'object' && addr ? addr.port : port;
  console.log(`agent listening on http://${host}:${actual}`);
});

const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
