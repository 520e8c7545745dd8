// Requests sent on to the server of the cluster that holds the instances (docs/decisions/056-cluster-postgres.md): the
// gateway's data-plane requests, and the API routes that read or write what lies on that server (uploaded code, logs,
// images, replicas):
// the request goes as it came — method, path, Host, the caller's own credential — so the peer resolves the address
// and judges the credential exactly as if the caller had asked it. A peer is trusted with nothing: the one header
// added, `x-berth-forwarded-by`, only stops a request from being sent on twice, and a caller who sets it merely has
// its request served where it arrived. Bodies stream both ways; an upgrade is piped as bytes.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type Dispatcher, Pool } from 'undici';
import { ApiError } from '../errors.js';
import { HOP_BY_HOP, hasBody } from './hop-by-hop.js';
import { rejectUpgrade, sendProblem } from './problem.js';

export const FORWARDED_BY = 'x-berth-forwarded-by';

/** Where a request is served: here, at the peer holding the instances, or nowhere yet (no server holds them). */
export type HolderDecision = { here: true } | { peer: URL } | { unavailable: string };

/** Peers (by origin) a request should not be sent to: one refused its connection. */
export interface Avoided {
  has(origin: string): boolean;
}

/**
 * How long a peer that refused a connection is passed over by the requests that have a choice (an agent's replicas
 * on several nodes): about as long as its lease takes to lapse in the tests, after which the node list says it.
 */
export const REFUSED_FOR_MS = 2_000;
const refusedUntil = new Map<string, number>();

/** The cluster's holders of instances as a server sees them, and this server's node id. */
export interface Holder {
  /** Where what the controllers' leader holds is served (replicas, tasks, builds, images, uploads). */
  decide(): HolderDecision;
  /** Where a sandbox's requests are served: on the node it is placed on (docs/decisions/059-cluster-placement.md). */
  decideSandbox(workspace: string, name: string): HolderDecision;
  /**
   * Where a request to an agent or function is served: a node holding a replica of it
   * (docs/decisions/086-replicas-across-nodes.md); undefined when its replicas are not placed (the leader's).
   */
  decideReplica?(
    kind: string,
    workspace: string,
    name: string,
    avoid: Avoided,
    sticky?: string,
  ): HolderDecision | undefined;
  self: string;
  /** Resolves after the next read of the cluster's node list, when a decision may have changed. */
  changed?(): Promise<void>;
}

/**
 * How long a request about what the controllers' leader holds waits for a holder while none answers (the leader
 * died and the next one has not taken over yet, about a second), and how many such requests wait at once on a
 * server; past either, it gets the 503 (or 502) it got at once before (docs/decisions/067-builds-ahead.md).
 */
export const HOLDER_WAIT_MS = 10_000;
export const MAX_HOLDER_WAITING = 512;
let holderWaiting = 0;

/** Keep-alive connections to each peer, made on first use (undici: a tenth of a millisecond less per hop). */
const peers = new Map<string, Pool>();
function poolOf(peer: URL): Pool {
  let p = peers.get(peer.origin);
  if (!p) {
    // No time limit of its own: an exec's answer or a log stream lasts as long as the client waits.
    p = new Pool(peer.origin, { connections: 256, headersTimeout: 0, bodyTimeout: 0 });
    peers.set(peer.origin, p);
  }
  return p;
}
/** Hop-by-hop headers, and `expect` (the body is piped at once, not after a 100 Continue). */
const DROPPED = new Set([...HOP_BY_HOP, 'expect']);

/** Sent on already (by a peer that judged it is not the holder): never again, or two servers could loop it. */
export const forwardedAlready = (req: IncomingMessage) => req.headers[FORWARDED_BY] !== undefined;

/**
 * Forwards `req` to `peer`. `sending` is told once the relay has the request in hand (it is being written to the peer,
 * or the relay answered the client itself). `notSent`, if given, is told instead of the client's 502 when the peer
 * failed before any byte of the request was written to it (its connection refused: a server that just died); the
 * request, body unread, may then be sent elsewhere.
 */
export function forwardToPeer(
  req: IncomingMessage,
  res: ServerResponse,
  peer: URL,
  self: string,
  on: { sending?: () => void; notSent?: (err: Error) => void } = {},
): void {
  const headers: Record<string, string | string[]> = {};
  for (const name in req.headers) {
    const v = req.headers[name];
    if (v !== undefined && !DROPPED.has(name)) headers[name] = v;
  }
  headers[FORWARDED_BY] = self;
  const addr = req.socket.remoteAddress;
  if (addr)
    headers['x-forwarded-for'] = req.headers['x-forwarded-for']
      ? `${req.headers['x-forwarded-for']}, ${addr}`
      : addr;
  const relay = new PeerRelay(res, peer, req.url, on);
  res.once('close', relay.onClientClose);
  poolOf(peer).dispatch(
    {
      path: req.url ?? '/',
      method: req.method as Dispatcher.HttpMethod,
      headers,
      body: hasBody(req) ? req : undefined,
    },
    relay,
  );
}

/** Writes the peer's answer to the client as it arrives (undici's dispatch interface, as gateway/proxy.ts does). */
class PeerRelay implements Dispatcher.DispatchHandler {
  private abort?: (err?: Error) => void;
  private gone = false;
  private resume?: () => void;

  constructor(
    private readonly res: ServerResponse,
    private readonly peer: URL,
    private readonly url: string | undefined,
    private readonly on: { sending?: () => void; notSent?: (err: Error) => void },
  ) {}

  readonly onClientClose = () => {
    if (this.res.writableFinished) return;
    this.gone = true;
    this.abort?.(new Error('the client closed the connection'));
  };

  // undici hands `abort` over just before it writes the request: until then, no byte of it left.
  onConnect(abort: (err?: Error) => void) {
    if (this.gone) abort(new Error('the client closed the connection'));
    else {
      this.abort = abort;
      this.on.sending?.();
    }
  }

  onHeaders(statusCode: number, raw: Buffer[], resume: () => void, statusText: string) {
    if (statusCode < 200) return true;
    this.resume = resume;
    const out: string[] = [];
    let sized = false;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i].toString('latin1');
      const lower = name.toLowerCase();
      if (DROPPED.has(lower)) continue;
      if (lower === 'content-length') sized = true;
      out.push(name, raw[i + 1].toString('latin1'));
    }
    this.res.writeHead(statusCode, statusText, out);
    // A stream (exec, logs, watch) opens at once; a sized answer leaves with its headers in one write.
    if (!sized) this.res.flushHeaders();
    return true;
  }

  onData(chunk: Buffer) {
    if (this.res.write(chunk)) return true;
    if (this.resume) this.res.once('drain', this.resume);
    return false;
  }

  onComplete() {
    this.res.removeListener('close', this.onClientClose);
    this.res.end();
  }

  onError(err: Error) {
    this.res.removeListener('close', this.onClientClose);
    if (!this.abort && this.on.notSent && !this.res.destroyed && !this.gone) return this.on.notSent(err);
    // This relay answers (or the client is gone): the request is settled here.
    this.on.sending?.();
    if (this.res.destroyed || this.gone) return;
    if (this.res.headersSent) return void this.res.destroy();
    sendProblem(
      this.res,
      new ApiError(
        'BAD_GATEWAY',
        `the server holding this address (${this.peer.host}) could not be reached: ${err.message}`,
      ),
      this.url,
    );
  }
}

export function forwardUpgradeToPeer(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  peer: URL,
  self: string,
) {
  const up = connect(Number(peer.port || 80), peer.hostname);
  let lines = `${req.method} ${req.url} HTTP/1.1\r\n`;
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    if (req.rawHeaders[i].toLowerCase() === FORWARDED_BY || /[\r\n]/.test(req.rawHeaders[i + 1])) continue;
    lines += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`;
  }
  lines += `${FORWARDED_BY}: ${self}\r\n\r\n`;
  let connected = false;
  up.once('connect', () => {
    connected = true;
    up.write(lines);
    if (head.length) up.write(head);
    up.pipe(socket);
    socket.pipe(up);
  });
  up.on('error', (err) => {
    if (!connected)
      rejectUpgrade(
        socket,
        new ApiError(
          'BAD_GATEWAY',
          `the server holding this address (${peer.host}) could not be reached: ${err.message}`,
        ),
      );
    else socket.destroy();
  });
  socket.on('error', () => up.destroy());
  socket.on('close', () => up.destroy());
  up.on('close', () => socket.destroy());
}

/**
 * Sends `req` where `decide` says, and says what became of it: `here` (this server serves it), `sent` (on its way to
 * a peer, whose answer is relayed), or the error to answer. With `wait`, while no server holds what it is about, or
 * the holder refused the connection before any byte of the request left (it just died), the request waits and is
 * decided again at each read of the node list, up to HOLDER_WAIT_MS: a failover is waited out, not answered 503. A
 * request of which a byte reached a peer is never sent again (it may not be idempotent).
 */
export async function sendToHolder(
  req: IncomingMessage,
  res: ServerResponse,
  holder: Holder,
  decide: (avoid: Avoided) => HolderDecision,
  wait: boolean,
): Promise<'here' | 'sent' | ApiError> {
  const deadline = performance.now() + HOLDER_WAIT_MS;
  let counted = false;
  let tried: Set<string> | undefined;
  const avoid: Avoided = {
    has(origin) {
      if (tried?.has(origin)) return true;
      const until = refusedUntil.get(origin);
      if (until === undefined) return false;
      if (until > performance.now()) return true;
      refusedUntil.delete(origin);
      return false;
    },
  };
  try {
    for (;;) {
      const w = decide(avoid);
      if ('here' in w) return 'here';
      let why: ApiError;
      if ('peer' in w) {
        const refused = await new Promise<Error | undefined>((settle) =>
          forwardToPeer(req, res, w.peer, holder.self, {
            sending: () => settle(undefined),
            notSent: wait ? settle : undefined,
          }),
        );
        if (!refused) return 'sent';
        // Not one byte left: a request with another holder to go to (an agent's replica on another node) goes there
        // at once, and the next requests pass this peer over for a while.
        tried ??= new Set();
        tried.add(w.peer.origin);
        refusedUntil.set(w.peer.origin, performance.now() + REFUSED_FOR_MS);
        const next = decide(avoid);
        if ('here' in next || ('peer' in next && !avoid.has(next.peer.origin))) continue;
        why = new ApiError(
          'BAD_GATEWAY',
          `the server holding this address (${w.peer.host}) could not be reached: ${refused.message}`,
        );
      } else why = new ApiError('UNAVAILABLE', w.unavailable);
      const left = deadline - performance.now();
      if (!wait || !holder.changed || left <= 0 || res.destroyed) return why;
      if (!counted) {
        if (holderWaiting >= MAX_HOLDER_WAITING) return why;
        holderWaiting++;
        counted = true;
      }
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        holder.changed(),
        new Promise((r) => {
          timer = setTimeout(r, left);
        }),
      ]);
      clearTimeout(timer);
    }
  } finally {
    if (counted) holderWaiting--;
  }
}

/**
 * A Fastify onRequest hook for API routes whose state lies on the holder's machine: on another server, the request
 * is sent there before its body is read. `only`: the requests of the routes it is added to that it sends (default
 * every one). `sandboxOf`: the sandbox a request concerns, whose node holds it (else the controllers' leader does).
 */
export function forwardHeldRoutes(
  holder: Holder | undefined,
  only?: (req: FastifyRequest) => boolean,
  sandboxOf?: (req: FastifyRequest) => { workspace: string; name: string } | undefined,
) {
  // A single server holds everything: a hook that returns at once, without the promise an async hook costs each request.
  if (!holder) return (_req: FastifyRequest, _reply: FastifyReply, done: () => void) => done();
  return async (req: FastifyRequest, reply: FastifyReply) => {
    if (forwardedAlready(req.raw) || (only && !only(req))) return;
    const sandbox = sandboxOf?.(req);
    // What the leader holds waits out a failover; a sandbox's node that is not answering stays so until its lease
    // lapses (seconds): answered at once.
    const w = await sendToHolder(
      req.raw,
      reply.raw,
      holder,
      sandbox ? () => holder.decideSandbox(sandbox.workspace, sandbox.name) : () => holder.decide(),
      !sandbox,
    );
    if (w === 'here') return;
    if (w instanceof ApiError) throw w;
    reply.hijack();
  };
}
