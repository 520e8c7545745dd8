// Upstreams for egress tests, inside a network namespace the test makes: an address of the benchmarking range
// (198.18.0.0/15, RFC 2544: set aside for test networks, so no real service sits there) on a veth whose host end is
// the only route to it, so nothing a test sends can leave this machine. Not a documentation range: a host may reach
// real services there (the npm registry resolves into 203.0.113.0/24 on one of ours), and while a test's route
// stood, or after a killed run left it, the host could not reach them. The benchmarking range is reserved
// (outbound/reserved-ranges.ts) like the documentation ones: a test opens its upstream's `cidr` as a server opens a
// LAN. One process in the namespace serves HTTPS (443, a test certificate), HTTP (80), raw TCP (22, 853), and DNS
// (53) that answers every `*.test` name with the upstream's own address; it prints one line per hit, which the
// test counts.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { selfSignedCert } from '../../egress/test-support.js';
import { run, sleep } from '../exec.js';

/**
 * One test file's upstream network: its own namespace, link and /24 of the benchmarking range, so two files running
 * at once never share one. host: the host end of the link; gateway: a second host-local address (an egress address).
 */
export interface UpstreamNet {
  ns: string;
  /** The upstream's range, to open to sandboxes (allowCidrs, BERTH_SANDBOX_ALLOW_CIDRS). */
  cidr: string;
  hostIf: string;
  host: string;
  gateway: string;
  address: string;
}

export const UPSTREAM: UpstreamNet = {
  ns: 'berth-t-egress',
  cidr: '198.18.0.0/24',
  hostIf: 'bteg0',
  host: '198.18.0.1',
  gateway: '198.18.0.2',
  address: '198.18.0.10',
};
/** For a second test file. */
export const UPSTREAM_2: UpstreamNet = {
  ns: 'berth-t-egress2',
  cidr: '198.18.1.0/24',
  hostIf: 'bteg1',
  host: '198.18.1.1',
  gateway: '198.18.1.2',
  address: '198.18.1.10',
};
/** Every upstream network of this file: a run killed mid-test leaves its namespace and route behind. */
const ALL_NETS = [UPSTREAM, UPSTREAM_2];

const SERVER = `
const fs = require('node:fs'), net = require('node:net'), http = require('node:http'), https = require('node:https');
const dgram = require('node:dgram');
const dnsPacket = require(process.env.DNS_PACKET);
const say = (l) => process.stdout.write(l + '\\n');
const handler = (proto) => (req, res) => {
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', () => {
    say('HIT ' + proto + ' ' + req.headers.host);
    res.end(JSON.stringify({ upstream: true, host: req.headers.host, headers: req.headers, body, from: req.socket.remoteAddress }));
  });
};
const tls = { key: fs.readFileSync(process.env.KEY), cert: fs.readFileSync(process.env.CERT) };
// A test's own HTTPS service (a CommonJS module exporting (req, res, say) => void) instead of the echo.
const own = process.env.HTTPS_HANDLER ? require(process.env.HTTPS_HANDLER) : undefined;
https.createServer(tls, own ? (req, res) => own(req, res, say) : handler('https')).listen(443);
http.createServer(handler('http')).listen(80);
for (const port of [22, 853, 25]) net.createServer((s) => { s.on('error', () => {}); say('CONN ' + port + ' ' + s.remoteAddress); s.end('raw'); }).listen(port);
process.on('uncaughtException', (e) => say('ERROR ' + e.message));
const udp = dgram.createSocket('udp4');
udp.on('message', (msg, r) => {
  const q = dnsPacket.decode(msg);
  const name = q.questions[0].name;
  say('DNS ' + name);
  const answers = name.endsWith('.test') && q.questions[0].type === 'A'
    ? [{ type: 'A', name, ttl: 5, data: process.env.SELF }] : [];
  udp.send(dnsPacket.encode({ type: 'response', id: q.id, flags: 0x180, questions: q.questions, answers }), r.port, r.address);
});
udp.bind(53, () => say('READY'));
`;

export interface Upstream {
  /** Lines the upstream printed so far (HIT, CONN, DNS). */
  lines: string[];
  count(prefix: string): number;
  /** The test CA's certificate (PEM): what sandboxes are told to trust for the upstream's HTTPS. */
  certPem: string;
  stop(): Promise<void>;
}

async function deleteNs(net: UpstreamNet): Promise<void> {
  // A killed run's upstream process would keep the namespace (and the test runner's stderr) alive.
  const pids = await run('ip', ['netns', 'pids', net.ns]).catch(() => '');
  for (const pid of pids.split(/\s+/).filter(Boolean)) {
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {}
  }
  await run('ip', ['netns', 'del', net.ns]).catch(() => undefined);
  await run('ip', ['link', 'del', net.hostIf]).catch(() => undefined);
}

/**
 * Egress tests of different files must not overlap: the egress child's ports are the host's (one server per host),
 * so a second driver's child would take over the first's sandboxes. A lock held by a `flock` child for the life
 * of the upstream. The holder watches the test process: once it is gone however it ended (SIGKILL included), the
 * holder kills the upstream process, deletes `net`'s namespace and link and lets go, so a killed run neither keeps
 * a route nor holds the lock (nor the test runner, waiting on the stderr the upstream shares).
 * Bounded, so a test process that hangs does not hold it for long.
 */
const EGRESS_TEST_LOCK = '/tmp/berth-egress-tests.lock';
const LOCK_HOLD_MAX_S = 900;

async function egressTestLock(net: UpstreamNet): Promise<ChildProcess> {
  const watch = [
    'echo locked',
    'i=0',
    `while kill -0 ${process.pid} 2>/dev/null && [ $i -lt ${LOCK_HOLD_MAX_S} ]; do sleep 1; i=$((i+1)); done`,
    `kill -0 ${process.pid} 2>/dev/null || { ip netns pids ${net.ns} | xargs -r kill -9; ip netns del ${net.ns}; ip link del ${net.hostIf}; } 2>/dev/null`,
    'true',
  ].join('\n');
  // --no-fork: the lock's holder is the process we kill, not a grandchild that would outlive it (its `sleep 1`
  // holds it a second at most).
  const lock = spawn('flock', ['--no-fork', EGRESS_TEST_LOCK, 'sh', '-c', watch], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    lock.stdout?.once('data', () => resolve());
    lock.once('exit', (code) => reject(new Error(`flock exited ${code}`)));
  });
  lock.stdout?.destroy();
  lock.unref();
  return lock;
}

export interface UpstreamOptions {
  /** A CommonJS module serving HTTPS on 443 in place of the echo: `(req, res, say) => void`, `say` printing a line. */
  httpsHandler?: string;
  /** More environment for that module (its configuration). */
  env?: Record<string, string>;
}

export async function startUpstream(
  net: UpstreamNet = UPSTREAM,
  opts: UpstreamOptions = {},
): Promise<Upstream> {
  const lock = await egressTestLock(net);
  const UPSTREAM = net;
  const UPSTREAM_NS = net.ns;
  const HOST_IF = net.hostIf;
  // Under the lock no other file's upstream is up, so what any of them left behind (a killed run) is stale.
  for (const stale of ALL_NETS) await deleteNs(stale);
  const dir = mkdtempSync(join(tmpdir(), 'berth-egress-up-'));
  const tls = selfSignedCert(dir, 'allowed.test', [
    'allowed.test',
    'denied.test',
    'other.test',
    'sub.allowed.test',
    'mail.test',
  ]);
  await run(
    'ip',
    ['-batch', '-'],
    [
      `netns add ${UPSTREAM_NS}`,
      `link add ${HOST_IF} type veth peer name eth0 netns ${UPSTREAM_NS}`,
      `addr add ${UPSTREAM.host}/24 dev ${HOST_IF}`,
      `addr add ${UPSTREAM.gateway}/24 dev ${HOST_IF}`,
      `link set ${HOST_IF} up`,
      '',
    ].join('\n'),
  );
  await run(
    'ip',
    ['-n', UPSTREAM_NS, '-batch', '-'],
    [
      'link set lo up',
      `addr add ${UPSTREAM.address}/24 dev eth0`,
      'link set eth0 up',
      `route add default via ${UPSTREAM.host}`,
      '',
    ].join('\n'),
  );
  // The guard every egress test starts with: the upstream's address must lead into our namespace, nowhere else.
  const route = await run('ip', ['-o', 'route', 'get', UPSTREAM.address]);
  assert.match(
    route,
    new RegExp(`dev ${HOST_IF} `),
    `the route to ${UPSTREAM.address} must lead into the test namespace`,
  );
  const lines: string[] = [];
  const proc: ChildProcess = spawn(
    'nsenter',
    [`--net=/run/netns/${UPSTREAM_NS}`, process.execPath, '-e', SERVER],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: {
        ...process.env,
        KEY: tls.keyPath,
        CERT: tls.certPath,
        SELF: UPSTREAM.address,
        DNS_PACKET: require_resolve('dns-packet'),
        ...(opts.httpsHandler ? { HTTPS_HANDLER: opts.httpsHandler } : {}),
        ...opts.env,
      },
    },
  );
  let buf = '';
  proc.stdout?.on('data', (d) => {
    buf += d;
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      lines.push(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  });
  for (let i = 0; !lines.includes('READY'); i++) {
    if (i > 200) throw new Error('the test upstream did not start');
    await sleep(25);
  }
  const certPem = tls.cert.toString('utf8');
  return {
    lines,
    count: (prefix) => lines.filter((l) => l.startsWith(prefix)).length,
    certPem,
    async stop() {
      proc.kill('SIGKILL');
      await deleteNs(net);
      rmSync(dir, { recursive: true, force: true });
      lock.kill('SIGKILL');
    },
  };
}

function require_resolve(name: string): string {
  return fileURLToPath(import.meta.resolve(name));
}
