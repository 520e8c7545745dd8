// TLS interception for destinations with routing rules: the sandbox's TLS ends here with a leaf certificate from
// its own CA (ca.ts), each request gets the rule's headers (and JSON body fields) with secrets filled in at
// forward time, and goes on over a new TLS connection to the vetted address, verified strictly against the name
// the sandbox asked for (the CONNECT host or SNI, never its Host header). HTTP/1.1 only: ALPN offers nothing
// else, so clients downgrade; upgrades (WebSocket) are refused.
import { randomUUID } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { createSecureContext, type SecureContext, TLSSocket } from 'node:tls';
import { Pool } from 'undici';
import { type CaMaterial, LeafMinter } from './ca.js';
import { decide, type EgressPolicy, fillSecrets, type RoutingRule, ruleFor } from './policy.js';

/** A JSON body larger than this is not buffered for merging: the request is refused (413), never sent unmerged. */
export const MAX_MERGE_BODY_BYTES = 8 * 1024 * 1024;
/** Leaf contexts kept per sandbox (one per host name it calls through a routing rule). */
const LEAF_CACHE_PER_SANDBOX = 256;
/** An upstream that does not answer within this long fails the request (502). */
const UPSTREAM_TIMEOUT_MS = 60_000;
/**
 * Headers never passed on, either way: hop-by-hop ones (http/hop-by-hop.ts is the server's list; runtime/ may not
 * import it), and a request's `expect`, which this server already answered (100 Continue) and undici refuses.
 */
const HOP_BY_HOP = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
];
const HOP_BY_HOP_SET = new Set(HOP_BY_HOP);

/**
 * Adds the header names a `Connection` value lists (lower case) to `into`: the sender's own hop-by-hop headers, dropped
 * with it (RFC 9110 §7.6.1; http/hop-by-hop.ts has the server's copy).
 */
function connectionNamed(value: string, into: string[] = []): string[] {
  for (const t of value.split(',')) {
    const name = t.trim().toLowerCase();
    if (name && name !== 'close' && name !== 'keep-alive') into.push(name);
  }
  return into;
}

/** Removes from a flat [name, value, …] list every header whose name is in `names` (rare: only when one is named). */
function dropNamed(headers: string[], names: string[]): void {
  let w = 0;
  for (let i = 0; i < headers.length; i += 2) {
    if (names.includes(headers[i].toLowerCase())) continue;
    headers[w++] = headers[i];
    headers[w++] = headers[i + 1];
  }
  headers.length = w;
}
/** Hosts whose routes are memoised per policy (a sandbox calling more names than this recomputes the oldest). */
const ROUTES_PER_POLICY = 256;
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);
/**
 * Upstream pools kept (one per sandbox, host, dialled address and egress address): a sandbox's next connection to
 * a routed host reuses an open upstream socket (or at least its TLS session) instead of a second full handshake.
 * Oldest dropped.
 */
const MAX_AGENTS = 1024;
/**
 * Upstream sockets per pool: as many as the sandbox may hold client connections (requests past it wait for one).
 * Fewer made a busy sandbox's sockets churn; the idle timeout bounds what an idle sandbox holds.
 */
const AGENT_SOCKETS = 512; // proxy.ts MAX_TUNNELS_PER_SANDBOX (importing it would close an import cycle)
/** An idle upstream socket is closed after this long (upstreams close theirs after 5-60 s; ours must go first). */
const AGENT_IDLE_MS = 4_000;
/** An upstream that does not accept a connection within this long fails the request (502). */
const UPSTREAM_CONNECT_TIMEOUT_MS = 10_000;

interface Conn {
  source: string;
  host: string;
  port: number;
  address: string;
  agent: Pool;
  /** The egress address `agent` binds (a policy update may name another: the next request uses its pool). */
  egress?: string;
}

export interface InterceptAudit {
  source: string;
  host: string;
  method: string;
  status: number;
  requestId: string;
  injected: number;
  /** The bearer file's id when its token was put in the request (the server refreshes it once on a 401). */
  token?: string;
}

export class Interceptor {
  private readonly minters = new Map<
    string,
    { ca: CaMaterial; minter: LeafMinter; leaves: Map<string, Promise<SecureContext>> }
  >();
  private readonly conns = new WeakMap<Socket, Conn>();
  /**
   * Keyed by sandbox first: a sandbox's requests never travel on another sandbox's upstream sockets, and its TLS
   * sessions (each pool's connector keeps its own) never resume another sandbox's.
   */
  private readonly agents = new Map<string, Pool>();
  private readonly server = createServer((req, res) => void this.onRequest(req, res));

  constructor(
    private readonly policyOf: (source: string) => EgressPolicy,
    private readonly caOf: (source: string) => CaMaterial | undefined,
    private readonly audit: (a: InterceptAudit) => void = () => undefined,
    /**
     * What every upstream connection verifies with: the default roots and NODE_EXTRA_CA_CERTS, built once rather
     * than per connection. It holds no key and no session: sessions stay in each sandbox's own agent.
     */
    private readonly upstreamTls: SecureContext = createSecureContext(),
  ) {
    this.server.on('upgrade', (_req, sock: Socket) => {
      sock.end(
        'HTTP/1.1 501 Not Implemented\r\nX-Proxy-Error: upgrade-not-intercepted\r\nContent-Length: 0\r\n\r\n',
      );
    });
    this.server.on('clientError', (_e, sock) => sock.destroy());
  }

  /** Whether connections from `source` to `host` are intercepted (a routing rule matches and a CA is held). */
  wants(source: string, host: string): boolean {
    return !!ruleFor(this.policyOf(source), host) && !!this.caOf(source);
  }

  /** Takes over a client connection whose ClientHello (`hello`) was already read. */
  async take(client: Socket, hello: Buffer, c: Omit<Conn, 'agent' | 'egress'>): Promise<void> {
    let context: SecureContext;
    try {
      context = await this.leafContext(c.source, c.host);
    } catch {
      return void client.destroy();
    }
    client.unshift(hello);
    client.setNoDelay(true); // see splice in proxy.ts: no Nagle wait on relayed answers
    const tls = new TLSSocket(client, {
      isServer: true,
      secureContext: context,
      ALPNProtocols: ['http/1.1'],
    });
    tls.on('error', () => client.destroy());
    const egress = this.policyOf(c.source).egressAddress;
    this.conns.set(tls, { ...c, egress, agent: this.agentFor(c, egress) });
    this.server.emit('connection', tls);
  }

  private async leafContext(source: string, host: string): Promise<SecureContext> {
    const ca = this.caOf(source);
    if (!ca) throw new Error('no CA for this sandbox');
    let m = this.minters.get(source);
    if (!m || m.ca !== ca) {
      m = { ca, minter: new LeafMinter(ca), leaves: new Map() };
      this.minters.set(source, m);
    }
    let ctx = m.leaves.get(host);
    if (!ctx) {
      if (m.leaves.size >= LEAF_CACHE_PER_SANDBOX) m.leaves.delete(m.leaves.keys().next().value as string);
      const minter = m.minter;
      ctx = minter.leaf(host).then((l) => createSecureContext({ cert: l.certPem, key: l.keyPem }));
      m.leaves.set(host, ctx);
    }
    return ctx;
  }

  /**
   * The upstream pool for a sandbox, host, vetted address and egress address. undici rather than node:https: per
   * request it builds no ClientRequest, agent bookkeeping or socket listeners, the largest share of the child's
   * JavaScript per intercepted request after the TLS writes themselves.
   */
  private agentFor(c: Omit<Conn, 'agent' | 'egress'>, egress: string | undefined): Pool {
    const key = `${c.source}|${c.host}|${c.port}|${c.address}|${egress ?? ''}`;
    let agent = this.agents.get(key);
    if (agent) {
      this.agents.delete(key); // re-inserted last: the map's order is least recently used first
    } else {
      const origin = `https://${c.address.includes(':') ? `[${c.address}]` : c.address}:${c.port}`;
      agent = new Pool(origin, {
        connections: AGENT_SOCKETS,
        keepAliveTimeout: AGENT_IDLE_MS,
        keepAliveMaxTimeout: AGENT_IDLE_MS,
        headersTimeout: UPSTREAM_TIMEOUT_MS,
        bodyTimeout: UPSTREAM_TIMEOUT_MS,
        ...(egress ? { localAddress: egress } : {}),
        // Verified against the name the sandbox asked for, whatever address is dialled.
        connect: {
          servername: c.host,
          secureContext: this.upstreamTls,
          timeout: UPSTREAM_CONNECT_TIMEOUT_MS,
          ALPNProtocols: ['http/1.1'],
        },
      });
      if (this.agents.size >= MAX_AGENTS) {
        const [oldKey, old] = this.agents.entries().next().value as [string, Pool];
        this.agents.delete(oldKey);
        void old.destroy().catch(() => undefined);
      }
    }
    this.agents.set(key, agent);
    return agent;
  }

  forget(source: string): void {
    this.minters.delete(source);
    for (const [key, agent] of this.agents)
      if (key.startsWith(`${source}|`)) {
        this.agents.delete(key);
        void agent.destroy().catch(() => undefined);
      }
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const c = this.conns.get(req.socket);
    if (!c) return void res.destroy();
    const requestId = randomUUID();
    let token: string | undefined;
    const audited = (status: number, injected: number, token?: string) =>
      this.audit({
        source: c.source,
        host: c.host,
        method: req.method ?? '',
        status,
        requestId,
        injected,
        ...(token ? { token } : {}),
      });
    const fail = (status: number, reason: string) => {
      audited(status, 0);
      res.writeHead(status, { 'x-proxy-error': reason, 'content-length': 0 }).end();
      req.resume();
    };
    // Read at every request: a policy update (narrowed, secrets rotated) applies from the next request on (the
    // route is memoised on the policy object, which an update replaces).
    const policy = this.policyOf(c.source);
    const route = routeFor(policy, c.host);
    if (!route.allow) return fail(403, 'blocked-by-allowlist');
    if (!route.headers) return fail(503, 'secret-unavailable');
    const rule = route.rule;
    let bearer: string | undefined;
    if (rule?.bearerFile) {
      bearer = readBearer(rule.bearerFile.path);
      if (!bearer) return fail(503, 'token-unavailable');
      token = rule.bearerFile.id;
    }
    const merge =
      !!rule?.body &&
      Object.keys(rule.body).length > 0 &&
      BODY_METHODS.has(req.method ?? '') &&
      /application\/json/i.test(String(req.headers['content-type']));
    // The client's headers as it sent them (names, order, repeats), less hop-by-hop ones and those Berth sets:
    // one flat array, the only per-request allocation besides the values the rule fills in.
    const headers: string[] = [];
    const raw = req.rawHeaders;
    // Whether a body follows (a length other than 0, or a transfer coding): undici sends a stream body without a
    // length chunked, so a request without one must get none. Read here rather than from the header object.
    let hasBody = false;
    let named: string[] | undefined;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i].toLowerCase();
      if (name === 'content-length') hasBody = raw[i + 1] !== '0';
      else if (name === 'transfer-encoding') hasBody = true;
      else if (name === 'connection') named = connectionNamed(raw[i + 1], named);
      if (route.replaced.has(name) || (merge && (name === 'content-length' || name === 'transfer-encoding')))
        continue;
      headers.push(raw[i], raw[i + 1]);
    }
    if (named?.length) dropNamed(headers, named);
    headers.push('host', route.hostHeader(c.port));
    for (const h of route.headers) headers.push(h[0], h[1]);
    let injected = route.headers.length;
    if (bearer) {
      headers.push('authorization', `Bearer ${bearer}`);
      injected++;
    }
    headers.push('x-berth-request-id', requestId);
    let body: Buffer | undefined;
    if (merge) {
      const raw = await readCapped(req, MAX_MERGE_BODY_BYTES);
      if (!raw) return fail(413, 'body-too-large-to-merge');
      let doc: unknown;
      try {
        doc = raw.length ? JSON.parse(raw.toString('utf8')) : {};
      } catch {
        doc = undefined;
      }
      if (doc && typeof doc === 'object' && !Array.isArray(doc)) {
        for (const [field, template] of Object.entries(rule?.body ?? {})) {
          const value = fillSecrets(String(template), rule?.secrets);
          if (value === undefined) return fail(503, 'secret-unavailable');
          (doc as Record<string, unknown>)[field] = value;
          injected++;
        }
        body = Buffer.from(JSON.stringify(doc));
      } else body = raw; // not a JSON object: sent as it came
      headers.push('content-length', String(body.length));
    }
    const path = (req.url ?? '/').startsWith('/') ? (req.url ?? '/') : originForm(req.url ?? '/');
    const agent = policy.egressAddress === c.egress ? c.agent : this.agentFor(c, policy.egressAddress);
    agent.dispatch(
      { path, method: req.method as 'GET', headers, body: body ?? (hasBody ? req : null) },
      new Relay(res, (status) => audited(status, injected, token)).failWith((e) => {
        const code = (e as NodeJS.ErrnoException).code ?? '';
        fail(
          502,
          /CERT|SIGNATURE|ALTNAME|SELF_SIGNED|ISSUER/.test(code)
            ? 'upstream-certificate'
            : 'upstream-unreachable',
        );
      }),
    );
  }
}

/**
 * The upstream's answer written straight into the sandbox's response (an undici dispatch handler): its status and
 * raw headers, less the upstream connection's own (its keep-alive, a close say nothing of the sandbox's), then
 * the body as it comes, with backpressure both ways. `stream()` did the same through a header object, an async
 * resource, a promise and `finished()`'s listeners per request.
 */
class Relay {
  private abort?: (reason?: Error) => void;
  private done = false;
  private onFail: (e: Error) => void = () => undefined;

  constructor(
    private readonly res: ServerResponse,
    private readonly onStatus: (status: number) => void,
  ) {
    // The sandbox went away first: the upstream request is abandoned, not read to its end into nothing.
    res.once('close', () => {
      if (!this.done) this.abort?.();
    });
  }

  failWith(f: (e: Error) => void): this {
    this.onFail = f;
    return this;
  }

  onConnect(abort: (reason?: Error) => void): void {
    this.abort = abort;
    if (this.res.destroyed) abort();
  }

  onHeaders(statusCode: number, raw: Buffer[], resume: () => void): boolean {
    if (statusCode < 200) return true; // 1xx: this server already answered the sandbox's own
    this.onStatus(statusCode);
    const headers: string[] = [];
    let named: string[] | undefined;
    for (let i = 0; i < raw.length; i += 2) {
      // latin1 both ways: the header bytes go on exactly as they came.
      const name = raw[i].toString('latin1');
      const lower = name.toLowerCase();
      if (lower === 'connection') named = connectionNamed(raw[i + 1].toString('latin1'), named);
      if (!HOP_BY_HOP_SET.has(lower)) headers.push(name, raw[i + 1].toString('latin1'));
    }
    if (named?.length) dropNamed(headers, named);
    try {
      this.res.writeHead(statusCode, headers);
    } catch (e) {
      // A header Node will not write: the upstream's fault, a 502, and its answer is not read further.
      this.onError(e as Error);
      this.abort?.(e as Error);
      return false;
    }
    this.res.on('drain', resume);
    return !this.res.writableNeedDrain;
  }

  onData(chunk: Buffer): boolean {
    return this.res.write(chunk);
  }

  onComplete(): void {
    if (this.done) return;
    this.done = true;
    this.res.end();
  }

  onError(e: Error): void {
    if (this.done) return;
    this.done = true;
    if (this.res.headersSent) this.res.destroy();
    else this.onFail(e);
  }
}

interface Route {
  allow: boolean;
  rule?: RoutingRule;
  /** The rule's headers, lower-case, secrets filled in; undefined when one names a secret the rule does not hold. */
  headers?: [string, string][];
  /** Header names never passed on from the client: hop-by-hop ones and every one Berth sets. */
  replaced: Set<string>;
  hostHeader(port: number): string;
}

/**
 * What a policy says for a host, worked out once per policy object: the child replaces a sandbox's object on every
 * update, so a narrowed list or a rotated secret is in force from the next request. A route is a function of the
 * policy's content and the host alone, so it can answer for no other policy than its own.
 */
const routes = new WeakMap<EgressPolicy, Map<string, Route>>();

function routeFor(policy: EgressPolicy, host: string): Route {
  let byHost = routes.get(policy);
  if (!byHost) {
    byHost = new Map();
    routes.set(policy, byHost);
  }
  let route = byHost.get(host);
  if (route) return route;
  const rule = ruleFor(policy, host);
  const replaced = new Set([...HOP_BY_HOP, 'host', 'x-berth-request-id']);
  let headers: [string, string][] | undefined = [];
  for (const [name, template] of Object.entries(rule?.headers ?? {})) {
    const value = fillSecrets(String(template), rule?.secrets);
    if (value === undefined) {
      headers = undefined;
      break;
    }
    headers.push([name.toLowerCase(), value]); // replaces whatever the client sent under any case
    replaced.add(name.toLowerCase());
  }
  if (rule?.bearerFile) replaced.add('authorization');
  route = {
    allow: decide(policy, host).allow,
    rule,
    headers,
    replaced,
    hostHeader: (port) => (port === 443 ? host : `${host}:${port}`),
  };
  if (byHost.size >= ROUTES_PER_POLICY) byHost.delete(byHost.keys().next().value as string);
  byHost.set(host, route);
  return route;
}

/** Bearer files read, by path: read again only when the file was replaced (a refresh renames a new one in). */
const bearers = new Map<string, { ino: number; mtimeMs: number; value: string }>();
/** Bearer files remembered at most: one per connection in use on this server. */
const MAX_BEARERS = 4096;

/** The token in a bearer file (one stat per request, a read only after a refresh); undefined when there is none. */
function readBearer(path: string): string | undefined {
  try {
    const st = statSync(path);
    const held = bearers.get(path);
    if (held && held.ino === st.ino && held.mtimeMs === st.mtimeMs) return held.value;
    const value = readFileSync(path, 'utf8').trim();
    if (bearers.size >= MAX_BEARERS) bearers.delete(bearers.keys().next().value as string);
    bearers.set(path, { ino: st.ino, mtimeMs: st.mtimeMs, value });
    return value || undefined;
  } catch {
    bearers.delete(path);
    return undefined;
  }
}

function originForm(url: string): string {
  try {
    const u = new URL(url);
    return `${u.pathname}${u.search}`;
  } catch {
    return '/';
  }
}

function readCapped(req: IncomingMessage, cap: number): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const parts: Buffer[] = [];
    let n = 0;
    req.on('data', (d: Buffer) => {
      n += d.length;
      if (n > cap) {
        resolve(undefined);
        req.destroy();
      } else parts.push(d);
    });
    req.on('end', () => resolve(Buffer.concat(parts)));
    req.on('error', () => resolve(undefined));
  });
}
