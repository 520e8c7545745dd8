// Interception's caches across sandboxes, in process on loopback (two sandboxes are two source addresses): each
// sandbox's TLS ends with a leaf of its own CA, its requests carry its own secret and travel on upstream sockets
// no other sandbox's requests use (and no upstream connection is made only to be closed), and a policy change is in force for the next request and the next connection
// even while the name's resolution is cached.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer as createHttpsServer, type Server } from 'node:https';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createSecureContext, connect as tlsConnect, type TLSSocket } from 'node:tls';
import { AddressPolicy } from '../../outbound/index.js';
import { type CaMaterial, mintCa } from './ca.js';
import { Interceptor } from './intercept.js';
import { DENY_ALL, type EgressPolicy } from './policy.js';
import { EgressProxy } from './proxy.js';
import { GuardedResolver } from './resolve.js';
import { type FakeResolver, selfSignedCert, startFakeResolver } from './test-support.js';

const OPENED = '127.0.0.2';
const A = '127.0.0.3';
const B = '127.0.0.4';
let dir: string;
let upstream: Server;
let upstreamPort: number;
let resolver: FakeResolver;
let proxy: EgressProxy;
let explicit: number;
/** What the upstream saw: per request, the upstream socket's port, the injected header and the body. */
const seen: { socket: number; key: string | undefined; body: string }[] = [];
/** What the upstream saw of the headers of `/hop`. */
let hopSeen: { hop?: string | string[]; kept?: string | string[] } | undefined;
/** Upstream answers left unfinished because their request was given up. */
let abandoned = 0;
/** TCP connections the upstream accepted. */
let upstreamConnections = 0;
/** Per upstream TLS connection, in order: whether it resumed an earlier session. */
const resumed: boolean[] = [];
let interceptor: Interceptor;
const policies = new Map<string, EgressPolicy>();
const cas = new Map<string, CaMaterial>();

const routed = (secret: string): EgressPolicy => ({
  allowedDomains: ['ok.test'],
  forbiddenDomains: [],
  routing: [{ destinations: ['ok.test'], headers: { 'x-key': '{{SECRET:k}}' }, secrets: { k: secret } }],
});

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'berth-intercept-test-'));
  const { key, cert } = selfSignedCert(dir, 'ok.test', true);
  upstream = createHttpsServer({ key, cert }, async (q, r) => {
    let body = '';
    for await (const d of q) body += d;
    seen.push({ socket: q.socket.remotePort ?? 0, key: q.headers['x-key'] as string | undefined, body });
    if (q.url === '/answer') {
      // Repeated headers, a byte outside ASCII, the upstream connection's own keep-alive, a body of many records.
      r.writeHead(201, [
        'Set-Cookie',
        'a=1',
        'Set-Cookie',
        'b=2',
        'X-Latin',
        'caf\u00e9',
        'Keep-Alive',
        'timeout=99',
        'Content-Length',
        String(1 << 20),
      ]);
      return void r.end(Buffer.alloc(1 << 20, 'x')); // a buffer: the head goes out in latin1 (a string body would make it UTF-8)
    }
    if (q.url === '/slow') {
      // Half an answer, then nothing: the proxy must give the request up when its sandbox leaves.
      r.on('close', () => {
        if (!r.writableFinished) abandoned++;
      });
      return void r.write('first');
    }
    if (q.url === '/hop') {
      // The headers the client's Connection named must not arrive; this answer names one of its own.
      hopSeen = { hop: q.headers['x-hop'], kept: q.headers['x-kept'] };
      r.writeHead(200, { connection: 'X-Up-Hop', 'x-up-hop': 'v', 'x-up-kept': 'k', 'content-length': '2' });
      return void r.end('ok');
    }
    // `/close`: this upstream connection ends with the answer (the next request needs a new one).
    if (q.url === '/close') r.setHeader('connection', 'close');
    r.end('ok');
  });
  upstream.on('connection', () => upstreamConnections++);
  upstream.on('secureConnection', (s: TLSSocket) => resumed.push(s.isSessionReused()));
  await new Promise<void>((resolve) => upstream.listen(0, OPENED, () => resolve()));
  upstreamPort = (upstream.address() as { port: number }).port;
  resolver = await startFakeResolver({ 'ok.test': OPENED });
  cas.set(A, await mintCa('a', ['ok.test']));
  cas.set(B, await mintCa('b', ['ok.test']));
  const policyOf = (s: string) => policies.get(s) ?? DENY_ALL;
  interceptor = new Interceptor(policyOf, (s) => cas.get(s), undefined, createSecureContext({ ca: cert }));
  proxy = new EgressProxy(
    policyOf,
    new GuardedResolver({
      servers: [resolver.server],
      policy: new AddressPolicy({ allowCidrs: [`${OPENED}/32`], loopback: 'when-listed' }),
    }),
    undefined,
    interceptor,
  );
  explicit = (await proxy.listen({ explicit: 0, tls: 0, http: 0 }, '127.0.0.1')).explicit;
});

after(() => {
  proxy.close();
  resolver.close();
  upstream.close();
  rmSync(dir, { recursive: true, force: true });
});

/** CONNECT from `source` through the explicit proxy: the status line, and the socket when it was 200. */
function connectFrom(source: string): Promise<{ status: string; sock: Socket }> {
  return new Promise((resolve, reject) => {
    const sock = connect({ port: explicit, host: '127.0.0.1', localAddress: source });
    let buf = '';
    sock.on('error', reject);
    sock.on('data', function onData(d) {
      buf += d;
      if (!buf.includes('\r\n\r\n')) return;
      sock.off('data', onData);
      resolve({ status: buf.split('\r\n')[0], sock });
    });
    sock.write(`CONNECT ok.test:${upstreamPort} HTTP/1.1\r\nHost: ok.test\r\n\r\n`);
  });
}

/** TLS over a CONNECTed socket, trusting only `ca`. */
function tlsOver(sock: Socket, ca: CaMaterial): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const t = tlsConnect({ socket: sock, servername: 'ok.test', ca: ca.certPem }, () => resolve(t));
    t.on('error', reject);
  });
}

/** One keep-alive request (a GET, or `head` and `body` as given) on an open TLS connection; the status line. */
function get(t: TLSSocket, path = '/', head = 'GET', body = ''): Promise<string> {
  return new Promise((resolve) => {
    let buf = '';
    const onData = (d: Buffer) => {
      buf += d;
      const end = buf.indexOf('\r\n\r\n');
      const len = Number(/content-length: (\d+)/i.exec(buf)?.[1] ?? 0);
      if (end >= 0 && buf.length >= end + 4 + len) {
        t.off('data', onData);
        resolve(buf.split('\r\n')[0]);
      }
    };
    t.on('data', onData);
    const length = body ? `Content-Length: ${body.length}\r\n` : '';
    t.write(`${head} ${path} HTTP/1.1\r\nHost: ok.test\r\nX-Key: from-the-client\r\n${length}\r\n${body}`);
  });
}

test("two sandboxes on one routed host: each its own CA's leaf, its own secret, never the other's upstream socket", async () => {
  policies.set(A, routed('secret-a'));
  policies.set(B, routed('secret-b'));
  seen.length = 0;
  const a = await tlsOver((await connectFrom(A)).sock, cas.get(A) as CaMaterial);
  const b = await tlsOver((await connectFrom(B)).sock, cas.get(B) as CaMaterial);
  for (let i = 0; i < 3; i++) {
    assert.match(await get(a), / 200 /);
    assert.match(await get(b), / 200 /);
  }
  a.destroy();
  b.destroy();
  assert.deepEqual(
    seen.map((s) => s.key),
    ['secret-a', 'secret-b', 'secret-a', 'secret-b', 'secret-a', 'secret-b'],
    "each request carries its sandbox's secret, never the client's own header",
  );
  const keysBySocket = new Map<number, Set<string | undefined>>();
  for (const s of seen) keysBySocket.set(s.socket, (keysBySocket.get(s.socket) ?? new Set()).add(s.key));
  for (const keys of keysBySocket.values())
    assert.equal(keys.size, 1, 'no upstream socket served both sandboxes');
  assert.equal(keysBySocket.size, 2, "each sandbox's requests reused its own kept-alive upstream socket");
  assert.equal(upstreamConnections, 2, 'no connection dialled only to be closed: one per sandbox, its agent');
  // B's connection to the host A has a leaf for: presented with B's CA's leaf, which A's trust refuses.
  const { sock } = await connectFrom(B);
  await assert.rejects(
    tlsOver(sock, cas.get(A) as CaMaterial),
    /self[- ]signed|unable to verify|certificate/i,
  );
  sock.destroy();
});

test('a policy change is in force on the next request and the next connection, the resolution cached or not', async () => {
  policies.set(A, routed('before'));
  seen.length = 0;
  const a = await tlsOver((await connectFrom(A)).sock, cas.get(A) as CaMaterial);
  assert.match(await get(a), / 200 /);
  policies.set(A, routed('rotated'));
  assert.match(await get(a), / 200 /);
  assert.deepEqual(
    seen.map((s) => s.key),
    ['before', 'rotated'],
    'the rotated secret is used from the next request',
  );
  policies.set(A, { ...routed('rotated'), allowedDomains: ['other.test'] });
  assert.match(await get(a), / 403 /, 'a request on an open connection to a host no longer allowed');
  a.destroy();
  const again = await connectFrom(A);
  again.sock.destroy();
  assert.match(again.status, / 403 /, 'a new connection to it (its address still cached) is refused');
});

test("a sandbox's new upstream connection resumes its own TLS session, never another sandbox's", async () => {
  // Nothing kept from the tests before: both sandboxes start without an upstream socket or session.
  interceptor.forget(A);
  interceptor.forget(B);
  policies.set(A, routed('secret-a'));
  policies.set(B, routed('secret-b'));
  seen.length = 0;
  resumed.length = 0;
  const a = await tlsOver((await connectFrom(A)).sock, cas.get(A) as CaMaterial);
  assert.match(
    await get(a, '/close'),
    / 200 /,
    "A's first request; the upstream then closes that connection",
  );
  assert.match(await get(a), / 200 /, "A's next request, on a new upstream connection");
  const b = await tlsOver((await connectFrom(B)).sock, cas.get(B) as CaMaterial);
  assert.match(
    await get(b),
    / 200 /,
    "B's first request, after A holds a session for the same host and address",
  );
  a.destroy();
  b.destroy();
  assert.deepEqual(
    resumed,
    [false, true, false],
    "A's second upstream connection resumed A's session; B's first did a full handshake",
  );
  assert.deepEqual(
    seen.map((s) => s.key),
    ['secret-a', 'secret-a', 'secret-b'],
    "each request carries its own sandbox's secret",
  );
});

test('request bodies go upstream as the client sent them, with a length or chunked', async () => {
  policies.set(A, routed('secret-a'));
  seen.length = 0;
  const a = await tlsOver((await connectFrom(A)).sock, cas.get(A) as CaMaterial);
  assert.match(await get(a, '/', 'POST', 'hello'), / 200 /);
  assert.match(await get(a, '/', 'GET'), / 200 /);
  a.destroy();
  const b = await tlsOver((await connectFrom(A)).sock, cas.get(A) as CaMaterial);
  b.write(
    'PUT / HTTP/1.1\r\nHost: ok.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n',
  );
  assert.match(await new Promise<string>((resolve) => b.once('data', (d) => resolve(String(d)))), / 200 /);
  b.destroy();
  // How the body is framed upstream is the proxy's (hop by hop); its bytes are the client's.
  assert.deepEqual(
    seen.map((s) => s.body),
    ['hello', '', 'abcde'],
  );
});

test("the upstream's answer reaches the sandbox byte for byte, less the upstream connection's own headers", async () => {
  policies.set(A, routed('secret-a'));
  const a = await tlsOver((await connectFrom(A)).sock, cas.get(A) as CaMaterial);
  const answer = await new Promise<Buffer>((resolve) => {
    const parts: Buffer[] = [];
    a.on('data', (d: Buffer) => {
      parts.push(d);
      const all = Buffer.concat(parts);
      const end = all.indexOf('\r\n\r\n');
      const len = Number(/content-length: (\d+)/i.exec(all.toString('latin1'))?.[1] ?? -1);
      if (end >= 0 && len >= 0 && all.length >= end + 4 + len) resolve(all);
    });
    a.write('GET /answer HTTP/1.1\r\nHost: ok.test\r\n\r\n');
  });
  a.destroy();
  const text = answer.toString('latin1');
  const head = text.slice(0, text.indexOf('\r\n\r\n'));
  assert.match(head, /^HTTP\/1.1 201 /);
  assert.deepEqual(
    head.match(/^set-cookie: .*$/gim),
    ['Set-Cookie: a=1', 'Set-Cookie: b=2'],
    'repeated headers kept, in order',
  );
  assert.match(head, /^X-Latin: caf\u00e9$/m, 'a byte outside ASCII passed on as it came');
  assert.doesNotMatch(head, /timeout=99/, "the upstream connection's keep-alive is not the sandbox's");
  assert.equal(text.length - head.length - 4, 1 << 20, 'the whole body');
});

test('headers that a Connection header names go no further, either way', async () => {
  policies.set(A, routed('secret-a'));
  const a = await tlsOver((await connectFrom(A)).sock, cas.get(A) as CaMaterial);
  const head = await new Promise<string>((resolve) => {
    let buf = '';
    a.on('data', (d: Buffer) => {
      buf += d;
      if (buf.includes('\r\n\r\nok')) resolve(buf.slice(0, buf.indexOf('\r\n\r\n')));
    });
    a.write(
      'GET /hop HTTP/1.1\r\nHost: ok.test\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nX-Kept: 1\r\n\r\n',
    );
  });
  a.destroy();
  assert.deepEqual(
    hopSeen,
    { hop: undefined, kept: '1' },
    'the request lost the header its Connection named',
  );
  assert.doesNotMatch(head, /x-up-hop/i, 'the answer lost the header its Connection named');
  assert.match(head, /^x-up-kept: k$/im);
});

test('a sandbox that leaves in the middle of an answer gives the upstream request up', async () => {
  policies.set(A, routed('secret-a'));
  abandoned = 0;
  const a = await tlsOver((await connectFrom(A)).sock, cas.get(A) as CaMaterial);
  await new Promise<void>((resolve) => {
    a.once('data', () => resolve());
    a.write('GET /slow HTTP/1.1\r\nHost: ok.test\r\n\r\n');
  });
  a.destroy();
  for (let i = 0; i < 200 && abandoned === 0; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(abandoned, 1, 'the upstream saw its request go');
});
