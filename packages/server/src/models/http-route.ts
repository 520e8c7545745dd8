// The model gateway's HTTP entry: `/run/<ws>/models/<name>/<provider path>`. Authenticates the caller with
// a Berth credential, reserves tokens under the model's maxToken policies, forwards to the provider (with
// fallbacks) and streams the answer back as it arrives, metering it on the side. Served on raw node:http
// ahead of Fastify (decision 052): a model call needs none of the API's routing, hooks, body parsers or
// per-request logger, which together cost more than the rest of the gateway's own work per call.
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Readable, Transform } from 'node:stream';
import type { FastifyBaseLogger, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../errors.js';
import { HOP_BY_HOP } from '../http/hop-by-hop.js';
import type { Endpoint } from './endpoints.js';
import { defaultMaxOutput, isEmbeddings } from './estimate.js';
import { CHAT_PATH, type Forwarded, forward, type IncomingCall, MODEL_PATHS } from './forward.js';
import { createModelGateway, type ModelGateway, type ModelGatewayDeps } from './index.js';
import { type CallSummary, CallMeter } from './meter.js';
import { pinCall, pinForm } from './model-pin.js';
import { MIN_CAPPED_OUTPUT, outputLimitOf } from './output-limit.js';
import { Cancel } from './provider-call.js';
import { MAX_INFERENCE_BODY, readBody } from './request-body.js';
import { registerModelRoutes } from './routes.js';
import type { ReserveResult } from './token-budget.js';
import { UsageObserver } from './stream/usage-observer.js';
import { AnthropicToChatStream, messageToChat } from './translate/anthropic-to-openai.js';
import { ChatToMessagesStream, chatToMessage } from './translate/messages-answer.js';
import { ChatToResponsesStream, chatToResponse } from './translate/responses-answer.js';
import { normalizeUsage, usageInJsonText } from './usage.js';
import { sendInferenceProblem } from './inference-problem.js';

/** Answers up to this size with a Content-Length are read whole and sent in one write (see send()). */
const MAX_BUFFERED_ANSWER = 256 * 1024;

/** Provider response headers not passed back: hop-by-hop, cookies of the provider's edge. */
const DROP_RESPONSE = new Set([...HOP_BY_HOP, 'set-cookie', 'alt-svc', 'server']);

/** `src.pipe(t)` with src's failure passed on; cheaper per call than stream.pipeline (no AbortController). */
function through<T extends Transform>(src: Readable, t: T): T {
  src.on('error', (err) => t.destroy(err));
  return src.pipe(t);
}

/**
 * The call as the provider will see it: body parsed when it is JSON (declared or not: a provider reads a JSON
 * body sent as text/plain, so the gateway must read and judge it too), model pinned, output limit read.
 */
function incoming(
  ep: Endpoint,
  req: IncomingMessage,
  body: Buffer | undefined,
  path: string,
  query: string,
): IncomingCall {
  const method = req.method ?? 'GET';
  const { raw, json } = readBody(body, req.headers);
  const pinned = pinCall(ep, method, path, query, json);
  const limit = outputLimitOf(method, pinned.path, json);
  return {
    method,
    path: pinned.path,
    query: pinned.query,
    headers: req.headers,
    raw,
    json,
    model: pinned.model,
    limit,
    maxOutput: limit.requested ?? defaultMaxOutput(pinned.model),
  };
}

/** Seconds of Retry-After beyond which clients are told not to retry on their own (they would hang). */
const MAX_CLIENT_RETRY_WAIT_S = 60;

/**
 * What a call may cost, reserved in every budget before the provider is asked (or a 429/422 thrown). Returns
 * a promise only when a long prompt is being counted in slices; a short one is judged at once.
 */
function reserve(gw: ModelGateway, ep: Endpoint, call: IncomingCall, meter: CallMeter): void | Promise<void> {
  if (!ep.budgets.length || !call.raw) return;
  // A body that is not JSON cannot be counted. On an inference path (which takes JSON) its size bounds its
  // input, a token being at least one byte. Elsewhere (file uploads, audio transcriptions) it reserves one token:
  // refused once the window is spent, charged what the provider reports, but not refused for its size.
  const estimate = call.json ? meter.estimateInput() : MODEL_PATHS.test(call.path) ? call.raw.length : 1;
  // The first call in a window this server has not claimed from waits for one claim (decision 057).
  const claimed = gw.budget.prepare(ep.budgets);
  if (typeof estimate === 'number' && !claimed) return book(gw, ep, call, meter, estimate);
  return Promise.all([estimate, claimed]).then(([n]) => book(gw, ep, call, meter, n));
}

/**
 * The output a call reserves. Under a budget limiting output every call is capped to it (decision 039): a
 * limit of the caller's own is kept and reserved (refused when it does not fit, as the caller chose it); a
 * call that sets none gets the output estimate, lowered to what the budgets can still cover, and is refused
 * below MIN_CAPPED_OUTPUT. Each of `choices` answers may reach the limit. Returns the least output a call
 * without a limit was refused for lack of, if so.
 */
function decideOutput(gw: ModelGateway, ep: Endpoint, call: IncomingCall, input: number) {
  if (isEmbeddings(call.path)) return { output: 0 };
  const { requested, choices, settable } = call.limit;
  const wanted = requested ?? Math.min(gw.outputEstimate, call.maxOutput);
  const room = settable ? gw.budget.outputRoom(ep.budgets, input) : Number.POSITIVE_INFINITY;
  if (room === Number.POSITIVE_INFINITY) return { output: wanted * choices };
  let each = wanted;
  let least: number | undefined;
  if (requested === undefined) {
    each = Math.min(wanted, Math.floor(room / choices));
    if (each < Math.min(MIN_CAPPED_OUTPUT, wanted)) each = least = Math.min(MIN_CAPPED_OUTPUT, wanted);
  }
  call.outputCap = each;
  call.maxOutput = each;
  return { output: each * choices, least };
}

function book(
  gw: ModelGateway,
  ep: Endpoint,
  call: IncomingCall,
  meter: CallMeter,
  inputEstimate: number,
): void | Promise<void> {
  const { output, least } = decideOutput(gw, ep, call, inputEstimate);
  const r = gw.budget.reserve(ep.budgets, { input: inputEstimate, output });
  // A server whose claim in the store is short claims more first (budget-ledger.ts).
  if (r instanceof Promise) return r.then((x) => booked(gw, ep, meter, x, inputEstimate, output, least));
  return booked(gw, ep, meter, r, inputEstimate, output, least);
}

function booked(
  gw: ModelGateway,
  ep: Endpoint,
  meter: CallMeter,
  r: ReserveResult,
  inputEstimate: number,
  output: number,
  least: number | undefined,
) {
  if (r.ok) {
    meter.hold(r.reservation);
    return;
  }
  gw.metrics.deniedBy(ep.workspace, r.policy);
  const per = ep.budgets.find((b) => b.name === r.policy);
  const window = per
    ? `${per.step > 1 ? `${per.step} ` : ''}${per.granularity}${per.step > 1 ? 's' : ''}`
    : 'window';
  const asked =
    r.dimension === 'input' ? inputEstimate : r.dimension === 'output' ? output : inputEstimate + output;
  // A call that set no limit was refused for the least output it would be given, not for one it asked.
  const unasked =
    least !== undefined && r.dimension !== 'input'
      ? ` (it sets no output limit, and Berth gives such a call at least ${least} output tokens)`
      : '';
  if (r.never)
    throw new ApiError(
      'POLICY_DENIED',
      `this call may use ${asked} ${r.dimension} tokens${unasked} but policy ${r.policy} allows ${r.limit} per ${window}; ask for fewer (max_tokens)`,
    );
  const headers: Record<string, string> = {
    'retry-after': String(r.retryAfterS),
    'retry-after-ms': String(r.retryAfterS * 1000),
  };
  // openai and @anthropic-ai/sdk honour any Retry-After without a cap; past a minute they must give up instead.
  if (r.retryAfterS > MAX_CLIENT_RETRY_WAIT_S) headers['x-should-retry'] = 'false';
  const until = new Date(r.windowEnd).toISOString();
  throw new ApiError(
    'RATE_LIMITED',
    r.inFlight
      ? `policy ${r.policy} allows ${r.limit} ${r.dimension} tokens per ${window}; calls in flight hold the rest of it until they finish: retry in ${r.retryAfterS} s`
      : `policy ${r.policy} allows ${r.limit} ${r.dimension} tokens per ${window}; this call (up to ${asked}${unasked}) cannot succeed in this window, which ends at ${until}`,
    { headers },
  );
}

/** A whole JSON answer in one write. */
function sendJson(res: ServerResponse, value: unknown) {
  const body = JSON.stringify(value);
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(body));
  res.end(body);
}

/** A streamed answer: cut when its source fails, and its source released when the client leaves. */
function sendStream(res: ServerResponse, s: Readable) {
  s.on('error', () => res.destroy());
  res.on('close', () => {
    if (!s.destroyed) s.destroy();
  });
  s.pipe(res);
}

async function send(
  gw: ModelGateway,
  res: ServerResponse,
  call: IncomingCall,
  fwd: Forwarded,
  meter: CallMeter,
) {
  const contentType = String(fwd.headers['content-type'] ?? '');
  const length = Number(fwd.headers['content-length'] ?? Number.NaN);
  if (
    !fwd.prepared.translate &&
    length <= MAX_BUFFERED_ANSWER &&
    !contentType.includes('text/event-stream')
  ) {
    // A whole answer of known, small size: one write of head and body instead of a piped, chunked stream
    // (half the gateway's cost per call at 32 connections). Nothing is held back that a client could use early.
    const buf = await fwd.body.whole();
    meter.firstByteAt = gw.now();
    if (contentType.includes('json')) meter.usage = usageInJsonText(buf.toString('utf8'));
    // The head as one flat list given to writeHead: no per-header setHeader (its validation, and the
    // response's header map) before the one write (decision 088). Node still validates every name and value.
    const head: (string | number)[] = ['x-berth-connection', fwd.upstream.connection.name];
    for (const k in fwd.headers) {
      const v = fwd.headers[k];
      if (v === undefined || k === 'content-length' || DROP_RESPONSE.has(k)) continue;
      if (typeof v === 'string') head.push(k, v);
      else for (const one of v) head.push(k, one);
    }
    head.push('content-length', buf.length);
    res.writeHead(fwd.statusCode, head as string[]);
    return void res.end(buf);
  }
  res.statusCode = fwd.statusCode;
  res.setHeader('x-berth-connection', fwd.upstream.connection.name);
  if (fwd.prepared.translate === 'messages') {
    if (contentType.includes('text/event-stream')) {
      const t = new ChatToMessagesStream(call.model ?? '', gw.now);
      meter.source = t;
      res.setHeader('content-type', 'text/event-stream; charset=utf-8');
      res.setHeader('cache-control', 'no-cache');
      return sendStream(res, through(fwd.body.stream(), t));
    }
    const chat = (await fwd.body.json()) as any;
    meter.firstByteAt = gw.now();
    meter.usage = normalizeUsage(chat?.usage);
    return sendJson(res, chatToMessage(chat, call.model));
  }
  if (fwd.prepared.translate) {
    const nowS = Math.floor(gw.now() / 1000);
    const responses = fwd.prepared.translate === 'responses';
    if (contentType.includes('text/event-stream')) {
      const t = new AnthropicToChatStream(
        responses || call.json?.stream_options?.include_usage === true,
        nowS,
        gw.now,
        fwd.prepared.structuredTool,
      );
      meter.source = t;
      res.setHeader('content-type', 'text/event-stream; charset=utf-8');
      res.setHeader('cache-control', 'no-cache');
      const chat = through(fwd.body.stream(), t);
      return sendStream(res, responses ? through(chat, new ChatToResponsesStream(nowS)) : chat);
    }
    const msg = (await fwd.body.json()) as any;
    meter.firstByteAt = gw.now();
    meter.usage = normalizeUsage(msg?.usage);
    const chat = messageToChat(msg, nowS, fwd.prepared.structuredTool);
    return sendJson(res, responses ? chatToResponse(chat, nowS) : chat);
  }
  for (const k in fwd.headers) {
    const v = fwd.headers[k];
    if (v !== undefined && !DROP_RESPONSE.has(k)) res.setHeader(k, v);
  }
  const observer = new UsageObserver(contentType, gw.now, fwd.prepared.stripUsageChunk);
  meter.source = observer;
  res.removeHeader('content-length');
  sendStream(res, through(fwd.body.stream(), observer));
}

/** `/run/<ws>/models/<name>[/<provider path>][?query]`, as Fastify's router read it before (decision 052). */
const MODEL_CALL = /^\/run\/([^/?]+)\/models\/([^/?]+)(\/[^?]*)?(?:\?(.*))?$/s;
/** Fastify's router refused longer path parameters; kept so nothing new is reachable. */
const MAX_PARAM_LENGTH = 500;

interface Address {
  workspace: string;
  model: string;
  /** The provider path, `/` when none was given. */
  path: string;
  query: string;
}

/** The model call a request URL addresses, decoded; undefined when it addresses none. */
export function modelCallOf(url: string): Address | undefined {
  if (!url.startsWith('/run/')) return undefined;
  const m = MODEL_CALL.exec(url);
  if (!m || m[1].length > MAX_PARAM_LENGTH || m[2].length > MAX_PARAM_LENGTH) return undefined;
  try {
    return {
      workspace: decodeURIComponent(m[1]),
      model: decodeURIComponent(m[2]),
      path: decodeURIComponent(m[3] ?? '/') || '/',
      query: m[4] ?? '',
    };
  } catch {
    throw new ApiError('MALFORMED_REQUEST', 'the request path holds an invalid percent-encoding');
  }
}

const tooLarge = () =>
  new ApiError('PAYLOAD_TOO_LARGE', `body is larger than ${MAX_INFERENCE_BODY} bytes`, {
    headers: { connection: 'close' },
  });

/** The request body, bounded: undefined when empty; a 413 past MAX_INFERENCE_BODY, before reading it all. */
function readRequest(req: IncomingMessage): Promise<Buffer | undefined> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > MAX_INFERENCE_BODY) return Promise.reject(tooLarge());
  if (!declared && req.headers['transfer-encoding'] === undefined) {
    req.resume();
    return Promise.resolve(undefined);
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let n = 0;
    req.on('data', (c: Buffer) => {
      n += c.length;
      if (n > MAX_INFERENCE_BODY) {
        req.removeAllListeners('data');
        req.resume();
        reject(tooLarge());
        return;
      }
      chunks.push(c);
    });
    req.on('end', () =>
      resolve(n ? (chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, n)) : undefined),
    );
    req.on('error', reject);
  });
}

/**
 * Serves model calls on raw node:http: returns whether the request was one (then it is answered here).
 * `closing` says the server is shutting down.
 */
export function modelCallHandler(gw: ModelGateway, log: FastifyBaseLogger, closing: () => boolean) {
  const logged = (summary: CallSummary | undefined) => {
    if (summary) log.info(summary, 'model call');
  };
  const logCall = (summary: ReturnType<CallMeter['finish']>) => {
    if (summary instanceof Promise)
      summary.then(logged, (err) => log.error({ err }, 'closing a model call’s accounting failed'));
    else logged(summary);
  };
  async function serve(req: IncomingMessage, res: ServerResponse, a: Address) {
    const startedAt = gw.now();
    if (closing()) throw new ApiError('UNAVAILABLE', 'the server is shutting down');
    if (a.path === '/')
      throw new ApiError(
        'NOT_FOUND',
        `add the provider's path: /run/${a.workspace}/models/${a.model}${CHAT_PATH} (or the provider's own, e.g. /v1/messages)`,
      );
    const body = await readRequest(req);
    const caller =
      gw.callers.cached(req.headers, a.workspace) ?? (await gw.callers.resolve(req.headers, a.workspace));
    const ep = await gw.endpoints.get(caller.access.workspace, a.model);
    let path = a.path;
    // @ai-sdk/anthropic appends `/messages` to a base URL it expects to end in /v1: both forms are served.
    if (/^\/messages(\/|$)/.test(path)) path = `/v1${path}`;
    const call = incoming(ep, req, body, path, a.query);
    if (call.raw && call.json === undefined) Object.assign(call, await pinForm(ep, call.raw, call.headers));
    const meter = new CallMeter(
      gw,
      ep.workspace,
      ep.name,
      caller.keyId,
      call.json,
      call.model,
      !isEmbeddings(call.path),
      startedAt,
    );
    const abort = new Cancel();
    res.on('close', () => {
      const completed = res.writableFinished;
      if (!completed) abort.abort();
      logCall(meter.finish(res.statusCode, completed));
    });
    // The caller left while its credential or endpoint was being read: 'close' has fired already.
    if (req.socket?.destroyed) {
      abort.abort();
      logCall(meter.finish(499, false));
      return;
    }
    const counting = reserve(gw, ep, call, meter);
    if (counting) {
      await counting;
      // The caller may have left while a long prompt was being counted.
      if (abort.aborted) return;
    }
    const fwd = await forward(ep, call, {
      agent: gw.agent,
      signal: abort,
      headersTimeoutMs: gw.upstreamTimeoutMs,
      bodyTimeoutMs: gw.upstreamTimeoutMs,
      onUnreachable: (connection, err, more) =>
        gw.unreachable.note(ep.workspace, ep.name, connection, err, more),
    });
    if (fwd.fellBackFrom.length)
      log.info(
        { model: ep.name, failed: fwd.fellBackFrom, served: fwd.upstream.connection.name },
        'model call fell back',
      );
    return send(gw, res, call, fwd, meter);
  }

  return (req: IncomingMessage, res: ServerResponse): boolean => {
    let a: Address | undefined;
    try {
      a = modelCallOf(req.url ?? '/');
    } catch (err) {
      sendInferenceProblem(req, res, err, log);
      return true;
    }
    if (!a) return false;
    serve(req, res, a).catch((err) => sendInferenceProblem(req, res, err, log));
    return true;
  };
}

/** Mounted once at the app root by main.ts: the /run entry, the /v0 read-outs, and shutdown. */
export const modelGateway: FastifyPluginAsync<ModelGatewayDeps> = async (app, deps) => {
  const gw = createModelGateway({
    ...deps,
    onError: (err) => app.log.error({ err }, 'writing model usage failed; retrying at the next flush'),
  });
  let closing = false;
  app.addHook('preClose', () => {
    closing = true;
  });
  app.addHook('onClose', () => gw.close());
  registerModelRoutes(app, gw);
  // Model calls are answered before Fastify routes the request; everything else goes on to it. The workload
  // gateway, started later, puts its own listener in front of this one the same way.
  const serves = modelCallHandler(gw, app.log, () => closing);
  const server = app.server;
  const api = server.listeners('request')[0] as RequestListener | undefined;
  if (!api) throw new Error('the model gateway must be mounted on an app with its HTTP server');
  server.removeListener('request', api);
  server.on('request', (req, res) => {
    if (!serves(req, res)) api.call(server, req, res);
  });
  // The same addresses as Fastify routes, so route listings (the cross-tenant test's among them) and
  // `inject` see them; a request reaching one is handed to the same handler with its body unread.
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null));
    const handOver = (req: FastifyRequest, reply: FastifyReply) => {
      reply.hijack();
      serves(req.raw, reply.raw);
    };
    scope.all('/run/:workspace/models/:model', handOver);
    scope.all('/run/:workspace/models/:model/*', handOver);
  });
};
