// The egress proxy in process, on loopback: a name that resolves to a blocked address (loopback, metadata, the
// host's own) is refused and never dialled (rebinding), the host's own address stays refused when the server's
// setting opens the range it is in, the explicit proxy answers refusals with a reason, and a CONNECT's TLS hello
// must name the host that was CONNECTed to.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect, type Socket } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { connect as tlsConnect } from 'node:tls';
import { AddressPolicy } from '../../outbound/index.js';
import type { EgressPolicy } from './policy.js';
import { type AuditLine, EgressProxy } from './proxy.js';
import { GuardedResolver } from './resolve.js';
import { type FakeResolver, selfSignedCert, startFakeResolver } from './test-support.js';

// The one loopback address opened, standing in for a LAN: sandboxes' egress never opens loopback, so this proxy's
// rules are built with loopback "when listed" (as the server's own requests have them); `hostProxy` below is
// built as a server builds it.
const OPENED = '127.0.0.2';
const hostAddress = Object.values(networkInterfaces())
  .flat()
  .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
const policy: EgressPolicy = { allowedDomains: ['*.test'], forbiddenDomains: [] };

let resolver: FakeResolver;
let proxy: EgressProxy;
let ports: { explicit: number; tls: number; http: number };
let blockedHits = 0;
const servers: Server[] = [];
const audit: AuditLine[] = [];
let dir: string;

const listen = (srv: Server, port: number, host: string) =>
  new Promise<void>((resolve) => {
    servers.push(srv);
    srv.listen(port, host, () => resolve());
  });

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'berth-proxy-test-'));
  const tls = selfSignedCert(dir, 'ok.test');
  // "Services on the host": what a rebinding name would aim at.
  await listen(
    createHttpServer((_q, r) => {
      blockedHits++;
      r.end('host');
    }),
    18080,
    '127.0.0.1',
  );
  await listen(
    createHttpServer((_q, r) => {
      r.end('ok');
    }),
    18080,
    OPENED,
  );
  await listen(
    createHttpsServer(tls, (_q, r) => {
      r.end('ok');
    }),
    18443,
    OPENED,
  );
  resolver = await startFakeResolver({
    'ok.test': OPENED,
    'rebind.test': '127.0.0.1',
    'meta.test': '169.254.169.254',
    'lan.test': '192.168.1.1',
    'down.test': '127.0.0.3',
    ...(hostAddress ? { 'host.test': hostAddress } : {}),
  });
  proxy = new EgressProxy(
    () => policy,
    new GuardedResolver({
      servers: [resolver.server],
      policy: new AddressPolicy({ allowCidrs: [`${OPENED}/32`], loopback: 'when-listed' }),
    }),
    (l) => audit.push(l),
  );
  ports = await proxy.listen({ explicit: 0, tls: 0, http: 0 }, '127.0.0.1');
});

after(() => {
  proxy.close();
  resolver.close();
  for (const s of servers) s.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The proxy's answer to a CONNECT: the status line and X-Proxy-Error, with the socket for what follows. */
function connectVia(
  target: string,
  port = ports.explicit,
): Promise<{ status: string; reason?: string; sock: Socket }> {
  return new Promise((resolve, reject) => {
    const sock = connect(port, '127.0.0.1');
    let buf = '';
    sock.on('error', reject);
    sock.on('data', function onData(d) {
      buf += d;
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      sock.off('data', onData);
      resolve({
        status: buf.split('\r\n')[0],
        reason: /x-proxy-error: ([^\r]*)/i.exec(buf)?.[1],
        sock,
      });
    });
    sock.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  });
}

test('names resolving to loopback, metadata, private or host addresses are refused and never dialled', async () => {
  const names = ['rebind.test', 'meta.test', 'lan.test', ...(hostAddress ? ['host.test'] : [])];
  for (const name of names) {
    const r = await connectVia(`${name}:18080`);
    r.sock.destroy();
    assert.match(r.status, / 403 /, name);
    assert.equal(r.reason, 'blocked-by-resolved-address', name);
  }
  assert.equal(blockedHits, 0);
});

test('IP literals are not names: refused whatever the allow list', async () => {
  for (const target of ['127.0.0.1:18080', `${OPENED}:18080`, '[::1]:18080']) {
    const r = await connectVia(target);
    r.sock.destroy();
    assert.match(r.status, / 403 /, target);
  }
  assert.equal(blockedHits, 0);
});

test("BERTH_SANDBOX_ALLOW_CIDRS covering the host's address opens its range but never the host", async () => {
  assert.ok(hostAddress, 'this host has a non-loopback IPv4 address');
  const lan = `${hostAddress.split('.').slice(0, 3).join('.')}.0/24`;
  let hostHits = 0;
  await listen(
    createHttpServer((_q, r) => {
      hostHits++;
      r.end('host');
    }),
    18081,
    hostAddress,
  );
  // Built as a server builds it from BERTH_SANDBOX_ALLOW_CIDRS=<the host's /24>.
  const guarded = new GuardedResolver({ servers: [resolver.server], allowCidrs: [lan] });
  const hostProxy = new EgressProxy(
    () => policy,
    guarded,
    () => {},
  );
  const p = await hostProxy.listen({ explicit: 0, tls: 0, http: 0 }, '127.0.0.1');
  try {
    const r = await connectVia('host.test:18081', p.explicit);
    r.sock.destroy();
    assert.match(r.status, / 403 /);
    assert.equal(r.reason, 'blocked-by-resolved-address');
    assert.equal(hostHits, 0, 'the host was never dialled');
    const other = `${hostAddress.split('.').slice(0, 3).join('.')}.${hostAddress.endsWith('.77') ? 78 : 77}`;
    assert.equal(guarded.allowed(other), true, 'another address of the opened range is open');
    assert.equal(guarded.allowed(hostAddress), false);
    assert.equal(guarded.allowed(`::ffff:${hostAddress}`), false);
    const withLoopback = new GuardedResolver({ allowCidrs: ['127.0.0.0/8', '10.0.0.0/8'] });
    assert.equal(withLoopback.allowed('127.0.0.1'), false, 'loopback never opens for sandboxes');
    assert.equal(withLoopback.allowed('10.200.0.2'), false, "the sandboxes' network stays closed");
    assert.equal(withLoopback.allowed('10.1.2.3'), true);
  } finally {
    hostProxy.close();
  }
});

test('an allowed name is dialled at its vetted address, and SMTP is refused even there', async () => {
  const res = await fetchVia('http://ok.test:18080/');
  assert.equal(res, 'ok');
  const smtp = await connectVia('ok.test:25');
  smtp.sock.destroy();
  assert.equal(smtp.reason, 'blocked-port');
});

test('a CONNECT tunnel carries TLS only for the host it named: another SNI is cut', async () => {
  const good = await connectVia('ok.test:18443');
  assert.match(good.status, / 200 /);
  assert.equal(await handshake(good.sock, 'ok.test'), 'secure');
  const bad = await connectVia('ok.test:18443');
  assert.match(bad.status, / 200 /);
  assert.equal(await handshake(bad.sock, 'evil.test'), 'closed');
  assert.ok(audit.some((l) => l.rule === 'sni-mismatch:evil.test'));
});

test('transparent TLS: the hello goes to the vetted address with the connection, both ways relayed, closing line last', async () => {
  const tls = selfSignedCert(dir, 'ok.test');
  await listen(
    createHttpsServer(tls, (q, r) => {
      r.end(`ok ${q.url}`);
    }),
    443,
    OPENED,
  );
  const sock = connect(ports.tls, '127.0.0.1');
  const t = tlsConnect({ socket: sock, servername: 'ok.test', rejectUnauthorized: false });
  const answer = await new Promise<string>((resolve, reject) => {
    let buf = '';
    t.on('data', (d) => (buf += d));
    t.on('end', () => resolve(buf));
    t.on('error', reject);
    t.write('GET /x HTTP/1.1\r\nHost: ok.test\r\nConnection: close\r\n\r\n');
  });
  assert.match(answer, /^HTTP\/1.1 200 /);
  assert.match(answer, /ok \/x$/);
  t.destroy();
  const lines = () => audit.filter((l) => l.mode === 'transparent-tls' && l.host === 'ok.test');
  for (let i = 0; i < 100 && lines().length < 2; i++) await new Promise((r) => setTimeout(r, 10));
  const [allow, closed] = lines();
  assert.equal(allow.decision, 'allow');
  assert.equal(closed.rule, 'closed');
  assert.ok((closed.bytesOut ?? 0) > 0 && (closed.bytesIn ?? 0) > 0, 'bytes counted both ways');
});

test('an upstream that refuses: a CONNECT is answered 502, a transparent connection closed, no closing line', async () => {
  const DOWN = '127.0.0.3'; // nothing listens there
  const lines: AuditLine[] = [];
  const downProxy = new EgressProxy(
    () => policy,
    new GuardedResolver({
      servers: [resolver.server],
      policy: new AddressPolicy({ allowCidrs: [`${DOWN}/32`], loopback: 'when-listed' }),
    }),
    (l) => lines.push(l),
  );
  const p = await downProxy.listen({ explicit: 0, tls: 0, http: 0 }, '127.0.0.1');
  try {
    const r = await connectVia('down.test:18443', p.explicit);
    r.sock.destroy();
    assert.match(r.status, / 502 /);
    assert.equal(r.reason, 'upstream-unreachable');
    const sock = connect(p.tls, '127.0.0.1');
    assert.equal(await handshake(sock, 'down.test'), 'closed');
    assert.ok(lines.some((l) => l.mode === 'transparent-tls' && l.decision === 'allow'));
    assert.ok(!lines.some((l) => l.rule === 'closed'), 'a connection never made has no closing line');
  } finally {
    downProxy.close();
  }
});

function handshake(sock: Socket, servername: string): Promise<string> {
  return new Promise((resolve) => {
    const t = tlsConnect({ socket: sock, servername, rejectUnauthorized: false });
    t.once('secureConnect', () => {
      t.destroy();
      resolve('secure');
    });
    t.once('error', () => resolve('closed'));
    t.once('close', () => resolve('closed'));
  });
}

/** A plain HTTP request in absolute form through the explicit proxy; resolves with the body. */
function fetchVia(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = connect(ports.explicit, '127.0.0.1');
    let buf = '';
    sock.on('data', (d) => (buf += d));
    sock.on('end', () => resolve(buf.slice(buf.indexOf('\r\n\r\n') + 4)));
    sock.on('error', reject);
    sock.write(`GET ${url} HTTP/1.1\r\nHost: ${new URL(url).host}\r\nConnection: close\r\n\r\n`);
  });
}
