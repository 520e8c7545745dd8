// The egress proxy: every TCP connection a sandbox under an egress policy makes leaves through here. Two ways in:
// explicit (HTTP_PROXY: CONNECT and absolute-form requests) and transparent (nftables redirects ports 80 and 443;
// the name comes from the Host header or the TLS server name). Either way the name is checked against the
// sandbox's policy, resolved here, and the vetted address dialled: what the sandbox resolved never matters.
import {
  createServer as createHttpServer,
  type IncomingMessage,
  request,
  type ServerResponse,
} from 'node:http';
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { Interceptor } from './intercept.js';
import { decide, type EgressPolicy, normalizeHost } from './policy.js';
import type { GuardedResolver } from './resolve.js';
import { MAX_HELLO_BYTES, parseClientHello, parseHttpHost, stripPort } from './tls-hello.js';

/** Open connections per sandbox: enough for a parallel package install, not enough to exhaust host ports. */
export const MAX_TUNNELS_PER_SANDBOX = 512;
/** A client has this long to send its first bytes (ClientHello or request head) before it is dropped. */
const FIRST_BYTES_TIMEOUT_MS = 10_000;
/** A connection with no traffic either way for this long is closed (half-dead peers hold host sockets). */
const IDLE_TIMEOUT_MS = 15 * 60_000;
/** Upstream connect bound: an unreachable upstream fails the sandbox's request rather than hanging it. */
const CONNECT_TIMEOUT_MS = 10_000;
/** Ports never reachable through the proxy: outbound mail from sandboxes is abuse far more often than not. */
const BLOCKED_PORTS = new Set([25]);

export type Mode = 'connect' | 'http' | 'transparent-tls' | 'transparent-http';

export interface AuditLine {
  source: string;
  host: string;
  port: number;
  mode: Mode;
  decision: 'allow' | 'deny';
  /** The pattern that allowed, or why it was denied. */
  rule: string;
  bytesOut?: number;
  bytesIn?: number;
}

interface Tunnel {
  host: string;
  client: Socket;
  upstream?: Socket;
}

export class EgressProxy {
  private readonly tunnels = new Map<string, Set<Tunnel>>();
  private readonly servers: Server[] = [];

  constructor(
    private readonly policyOf: (source: string) => EgressPolicy,
    private readonly resolver: GuardedResolver,
    private readonly audit: (line: AuditLine) => void = () => undefined,
    private readonly interceptor?: Interceptor,
  ) {}

  /** Listens (port 0: any free port); resolves with the ports bound. */
  async listen(
    ports: { explicit: number; tls: number; http: number },
    host = '0.0.0.0',
  ): Promise<{ explicit: number; tls: number; http: number }> {
    const explicit = createHttpServer((req, res) => void this.onRequest(req, res));
    explicit.on(
      'connect',
      (req: IncomingMessage, sock: Socket, head: Buffer) => void this.onConnect(req, sock, head),
    );
    explicit.on('clientError', (_e, sock) => sock.destroy());
    const tls = createServer((s) => this.onTransparent(s, 'transparent-tls'));
    const http = createServer((s) => this.onTransparent(s, 'transparent-http'));
    for (const [srv, port] of [
      [explicit, ports.explicit],
      [tls, ports.tls],
      [http, ports.http],
    ] as const) {
      await new Promise<void>((resolve, reject) => {
        srv.once('error', reject);
        srv.listen(port, host, () => resolve());
      });
      this.servers.push(srv);
    }
    const portOf = (s: Server) => (s.address() as { port: number }).port;
    return { explicit: portOf(explicit), tls: portOf(tls), http: portOf(http) };
  }

  /** A sandbox's policy changed: its open connections to names no longer allowed are closed now. */
  revalidate(source: string): void {
    const policy = this.policyOf(source);
    for (const t of this.tunnels.get(source) ?? [])
      if (!decide(policy, t.host).allow) {
        t.client.destroy();
        t.upstream?.destroy();
      }
  }

  close(): void {
    for (const s of this.servers) s.close();
    for (const set of this.tunnels.values()) for (const t of set) t.client.destroy();
  }

  private async onConnect(req: IncomingMessage, client: Socket, head: Buffer): Promise<void> {
    client.on('error', () => undefined);
    const target = parseHostPort(req.url ?? '');
    const source = client.remoteAddress ?? '';
    if (!target) return refuse(client, 400, 'bad-connect-target');
    const { host, port } = target;
    const deny = (status: number, reason: string) => refuse(client, status, reason);
    const address = await this.vet(source, host, port, 'connect', deny);
    if (!address) return;
    // A host the interceptor wants is not dialled before the first bytes: TLS goes to the interceptor's agent for
    // this sandbox (a kept-alive socket when it has one), and only anything else needs a connection of its own.
    const intercepting = !!this.interceptor?.wants(source, host);
    let upstream: Socket | undefined;
    if (!intercepting) {
      // The 200 waits for the upstream: an unreachable one is this CONNECT's 502, not a closed tunnel.
      upstream = this.dial(source, host, port, 'connect', address, client, deny);
      if (!(await connected(upstream))) return;
    }
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    // Whatever the client sends first decides: a TLS hello must name the host it CONNECTed to.
    const first = await firstBytes(client, head, (b) => {
      const r = parseClientHello(b);
      return r.complete ? r : undefined;
    });
    if (!first) return void upstream?.destroy();
    const { buf, result } = first;
    if (result.tls && result.sni !== undefined && normalizeHost(result.sni) !== normalizeHost(host)) {
      this.audit({
        source,
        host,
        port,
        mode: 'connect',
        decision: 'deny',
        rule: `sni-mismatch:${result.sni}`,
      });
      client.destroy();
      return void upstream?.destroy();
    }
    if (result.tls && this.interceptor?.wants(source, host)) {
      upstream?.destroy();
      if (!upstream) this.track(source, host, client);
      return this.interceptor.take(client, buf, { source, host, port, address });
    }
    upstream ??= this.dial(source, host, port, 'connect', address, client, () => client.destroy());
    splice(client, upstream, buf);
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const client = req.socket;
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      return void res.writeHead(400, { 'x-proxy-error': 'not-absolute-form' }).end();
    }
    if (url.protocol !== 'http:') return void res.writeHead(400, { 'x-proxy-error': 'not-http' }).end();
    const source = client.remoteAddress ?? '';
    const port = Number(url.port || 80);
    const host = url.hostname;
    const deny = (status: number, reason: string) =>
      void res.writeHead(status, { 'x-proxy-error': reason, connection: 'close' }).end();
    const target = await this.vet(source, host, port, 'http', deny);
    if (!target) return;
    const headers = { ...req.headers };
    delete headers['proxy-connection'];
    delete headers['proxy-authorization'];
    headers.host = url.host;
    const t = this.track(source, host, client, res);
    const up = request(
      {
        host: target,
        port,
        method: req.method,
        path: `${url.pathname}${url.search}`,
        headers,
        setHost: false,
        timeout: CONNECT_TIMEOUT_MS,
        localAddress: this.policyOf(source).egressAddress,
      },
      (ur) => {
        res.writeHead(ur.statusCode ?? 502, ur.headers);
        ur.pipe(res);
      },
    );
    up.on('socket', (s) => {
      t.upstream = s;
    });
    up.on('timeout', () => up.destroy());
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502, { 'x-proxy-error': 'upstream-unreachable' });
      res.end();
    });
    req.pipe(up);
  }

  private onTransparent(client: Socket, mode: 'transparent-tls' | 'transparent-http'): void {
    client.on('error', () => undefined);
    const source = client.remoteAddress ?? '';
    const port = mode === 'transparent-tls' ? 443 : 80;
    void firstBytes(client, Buffer.alloc(0), (b) => {
      if (mode === 'transparent-http') {
        const r = parseHttpHost(b);
        return r.complete ? { host: r.host } : undefined;
      }
      const r = parseClientHello(b);
      return r.complete ? { host: r.tls ? r.sni : undefined } : undefined;
    }).then(async (first) => {
      if (!first) return;
      const host = first.result.host;
      if (!host) {
        this.audit({ source, host: '', port, mode, decision: 'deny', rule: 'no-server-name' });
        return void client.destroy();
      }
      const deny = () => client.destroy();
      const address = await this.vet(source, host, port, mode, deny);
      if (!address) return;
      if (mode === 'transparent-tls' && this.interceptor?.wants(source, host)) {
        // Not dialled here: the interceptor's agent for this sandbox sends the requests, on a socket it keeps
        // open when it has one (a connection made here only to be closed cost a round trip to the upstream).
        this.track(source, host, client);
        return this.interceptor.take(client, first.buf, { source, host, port, address });
      }
      // Relayed from now on: the hello waits in the connecting socket and goes out in the turn the connection is
      // made, without a turn of ours in between (a refused or timed-out connect closes the client, as before).
      splice(client, this.dial(source, host, port, mode, address, client, deny), first.buf);
    });
  }

  /** Policy, port and address checks; the address to dial, or undefined once `deny` has answered. */
  private async vet(
    source: string,
    host: string,
    port: number,
    mode: Mode,
    deny: (status: number, reason: string) => void,
  ): Promise<string | undefined> {
    const line = (decision: 'allow' | 'deny', rule: string) =>
      this.audit({ source, host, port, mode, decision, rule });
    if (BLOCKED_PORTS.has(port)) {
      line('deny', 'blocked-port');
      return void deny(403, 'blocked-port');
    }
    if ((this.tunnels.get(source)?.size ?? 0) >= MAX_TUNNELS_PER_SANDBOX) {
      line('deny', 'too-many-connections');
      return void deny(429, 'too-many-connections');
    }
    const verdict = decide(this.policyOf(source), host);
    if (!verdict.allow) {
      line('deny', verdict.reason);
      return void deny(403, 'blocked-by-allowlist');
    }
    const r = await this.resolver.resolve(source, normalizeHost(host) ?? host);
    if (!r.addresses.length) {
      const reason = 'reason' in r ? r.reason : 'name-not-resolved';
      line('deny', reason);
      return void deny(reason === 'name-not-resolved' ? 502 : 403, reason);
    }
    line('allow', verdict.rule);
    return r.addresses[0];
  }

  /**
   * Starts the connection to a vetted address and returns its socket at once (writes wait in it until it is
   * connected), tracked against the sandbox's policy; a connect that fails or times out is `deny`'s 502.
   */
  private dial(
    source: string,
    host: string,
    port: number,
    mode: Mode,
    address: string,
    client: Socket,
    deny: (status: number, reason: string) => void,
  ): Socket {
    const t = this.track(source, host, client);
    const localAddress = this.policyOf(source).egressAddress;
    const upstream = connect({
      host: address,
      port,
      timeout: CONNECT_TIMEOUT_MS,
      localAddress,
      noDelay: true,
    });
    t.upstream = upstream;
    let failed = false;
    const fail = () => {
      upstream.destroy();
      if (!failed && !client.destroyed) deny(502, 'upstream-unreachable');
      failed = true;
    };
    upstream.once('timeout', fail);
    upstream.on('error', fail);
    upstream.once('connect', () => {
      upstream.setTimeout(0);
      upstream.off('timeout', fail);
      upstream.off('error', fail);
      upstream.on('error', () => undefined);
      // Only a connection that was made has a closing line (a failed dial's bytes were never sent).
      client.once('close', () =>
        this.audit({
          source,
          host,
          port,
          mode,
          decision: 'allow',
          rule: 'closed',
          bytesOut: upstream.bytesWritten,
          bytesIn: upstream.bytesRead,
        }),
      );
    });
    return upstream;
  }

  /** Registers a connection (or one request on a kept-alive one: `until` is its response) for revalidate. */
  private track(source: string, host: string, client: Socket, until: NodeJS.EventEmitter = client): Tunnel {
    const t: Tunnel = { host, client };
    let set = this.tunnels.get(source);
    if (!set) {
      set = new Set();
      this.tunnels.set(source, set);
    }
    set.add(t);
    until.once('close', () => {
      t.upstream?.destroy();
      set.delete(t);
      if (!set.size) this.tunnels.delete(source);
    });
    return t;
  }
}

function parseHostPort(s: string): { host: string; port: number } | undefined {
  const host = stripPort(s);
  const port = Number(s.slice(host.length + 1));
  if (!host || !Number.isInteger(port) || port < 1 || port > 65535) return undefined;
  return { host: host.replace(/^\[|\]$/g, ''), port };
}

/** Whether a socket from `dial` got connected (false once it failed: its `deny` has answered). */
function connected(upstream: Socket): Promise<boolean> {
  if (upstream.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    upstream.once('connect', () => resolve(true));
    upstream.once('close', () => resolve(false));
  });
}

function refuse(client: Socket, status: number, reason: string): void {
  const text =
    { 400: 'Bad Request', 403: 'Forbidden', 429: 'Too Many Requests', 502: 'Bad Gateway' }[status] ?? 'Error';
  client.end(
    `HTTP/1.1 ${status} ${text}\r\nX-Proxy-Error: ${reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
  );
}

/** Collects the client's first bytes until `parse` can decide (or the cap or the timeout is hit: dropped). */
function firstBytes<T>(
  client: Socket,
  head: Buffer,
  parse: (b: Buffer) => T | undefined,
): Promise<{ buf: Buffer; result: T } | undefined> {
  return new Promise((resolve) => {
    let buf = head;
    const done = (v: { buf: Buffer; result: T } | undefined) => {
      clearTimeout(timer);
      client.off('data', onData);
      client.off('close', onClose);
      client.pause();
      if (!v) client.destroy();
      resolve(v);
    };
    const onData = (d: Buffer) => {
      // A hello or request head nearly always comes whole in one read: kept as it came, not copied.
      buf = buf.length ? Buffer.concat([buf, d]) : d;
      const r = parse(buf);
      if (r !== undefined) done({ buf, result: r });
      else if (buf.length > MAX_HELLO_BYTES) done(undefined);
    };
    const onClose = () => done(undefined);
    const timer = setTimeout(() => done(undefined), FIRST_BYTES_TIMEOUT_MS);
    if (head.length) {
      const r = parse(head);
      if (r !== undefined) return done({ buf, result: r });
    }
    client.on('data', onData);
    client.once('close', onClose);
  });
}

/** Sends what was read already, then copies both ways until either side closes. */
function splice(client: Socket, upstream: Socket, already: Buffer): void {
  // Relayed segments go out at once: Nagle's wait for an ACK (delayed by the peer) would add up to 40 ms a turn.
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  if (already.length) upstream.write(already);
  client.setTimeout(IDLE_TIMEOUT_MS, () => client.destroy());
  upstream.on('close', () => client.destroy());
  client.on('close', () => upstream.destroy());
  client.pipe(upstream);
  upstream.pipe(client);
  client.resume();
}
