// Upstreams for egress tests, inside a network namespace the test makes: a documentation address (TEST-NET-3)
// on a veth whose host end is the only route to it, so nothing a test sends can leave this machine. One process
// in the namespace serves HTTPS (443, a test certificate), HTTP (80), raw TCP (22, 853), and DNS (53) that answers
// every `*.test` name with the upstream's own address; it prints one line per hit, which the test counts.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { run, sleep } from '../exec.js';

export const UPSTREAM_NS = 'berth-t-egress';
const HOST_IF = 'bteg0';
export const UPSTREAM = { host: '203.0.113.1', address: '203.0.113.10' };

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
https.createServer(tls, handler('https')).listen(443);
http.createServer(handler('http')).listen(80);
for (const port of [22, 853, 25]) net.createServer((s) => { s.on('error', () => {}); say('CONN ' + port); s.end('raw'); }).listen(port);
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

async function deleteNs(): Promise<void> {
  await run('ip', ['netns', 'del', UPSTREAM_NS]).catch(() => undefined);
  await run('ip', ['link', 'del', HOST_IF]).catch(() => undefined);
}

export async function startUpstream(): Promise<Upstream> {
  await deleteNs();
  const dir = mkdtempSync(join(tmpdir(), 'berth-egress-up-'));
  const key = join(dir, 'key.pem');
  const cert = join(dir, 'cert.pem');
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    key,
    '-out',
    cert,
    '-days',
    '1',
    '-subj',
    '/CN=allowed.test',
    '-addext',
    'subjectAltName=DNS:allowed.test,DNS:denied.test,DNS:other.test,DNS:sub.allowed.test',
  ]);
  await run(
    'ip',
    ['-batch', '-'],
    [
      `netns add ${UPSTREAM_NS}`,
      `link add ${HOST_IF} type veth peer name eth0 netns ${UPSTREAM_NS}`,
      `addr add ${UPSTREAM.host}/24 dev ${HOST_IF}`,
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
        KEY: key,
        CERT: cert,
        SELF: UPSTREAM.address,
        DNS_PACKET: require_resolve('dns-packet'),
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
  const certPem = readFileSync(cert, 'utf8');
  return {
    lines,
    count: (prefix) => lines.filter((l) => l.startsWith(prefix)).length,
    certPem,
    async stop() {
      proc.kill('SIGKILL');
      await deleteNs();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function require_resolve(name: string): string {
  return fileURLToPath(import.meta.resolve(name));
}
