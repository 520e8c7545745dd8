// bench/sandboxes egress: what the egress proxy adds. From inside a sandbox to an HTTPS upstream in a network
// namespace this bench makes (198.18.2.10, benchmarking range: nothing leaves the machine), new-connection request
// latency and requests per second over 100 keep-alive connections, for a sandbox without a policy (direct, the
// baseline), one under an allow list (opaque tunnel) and one with a routing rule (intercepted, header injected).
// Targets: added p50 <= 0.5 ms opaque, <= 2 ms intercepted; rps through the proxy >= 70% of direct.
// Wall-clock ratios move with whatever else the machine runs; beside them, the CPU time the egress child (the
// process that proxies) spends per new connection and per kept-alive request, read from /proc, against the
// upstream's own CPU per request in the direct run: a loaded machine disturbs these far less.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { selfSignedCert } from '../../packages/server/dist/runtime/egress/test-support.js';
import { header, row } from '../lib/report.mjs';
import { startSandboxBerth } from './lib.mjs';

const NS = 'berth-b-egress';
const HOST_IF = 'bbeg0';
const UP = '198.18.2.10';
const UP_HOST = '198.18.2.1';
const UP_CIDR = '198.18.2.0/24';
const LATENCY_N = Number(process.env.BENCH_EGRESS_REQUESTS ?? 300);
/**
 * New connections made and not measured before each path's latency phase: the egress child starts with the first
 * policy, so the opaque path met it cold (its JavaScript not yet compiled, TurboFan busy beside it) while the direct
 * path's upstream was already warm; a long-running child is warm.
 */
const WARMUP_N = Number(process.env.BENCH_EGRESS_WARMUP ?? 50);
const RPS_SECONDS = 3;

const UPSTREAM = `
const https = require('node:https'), fs = require('node:fs'), dgram = require('node:dgram');
const dnsPacket = require(process.env.DNS_PACKET);
https.createServer({ key: fs.readFileSync(process.env.KEY), cert: fs.readFileSync(process.env.CERT) },
  (q, r) => r.end('ok')).listen(443);
const udp = dgram.createSocket('udp4');
udp.on('message', (m, r) => { const q = dnsPacket.decode(m);
  udp.send(dnsPacket.encode({ type: 'response', id: q.id, flags: 0x180, questions: q.questions,
    answers: q.questions[0].type === 'A' ? [{ type: 'A', name: q.questions[0].name, ttl: 5, data: '${UP}' }] : [] }), r.port, r.address); });
udp.bind(53, () => console.log('READY'));
`;

/** Runs inside a sandbox: `lat`: latency of LATENCY_N new-connection GETs; `rps`: over 100 keep-alive connections. */
const CLIENT = `
const https = require('node:https'), fs = require('node:fs');
const ca = [fs.readFileSync('/tmp/up-ca.pem')];
try { ca.push(fs.readFileSync('/run/berth/egress-ca.pem')); } catch {}
const base = { host: '${UP}', port: 443, servername: 'bench.test', headers: { host: 'bench.test' }, ca, path: '/' };
const get = (agent) => new Promise((ok, ko) => https.get({ ...base, agent }, (r) => { r.resume(); r.on('end', ok); }).on('error', ko));
(async () => {
  if (process.argv[2] === 'lat') {
  const lat = [];
  for (let i = 0; i < Number(process.argv[3]); i++) { const t = performance.now(); await get(false); lat.push(performance.now() - t); }
  lat.sort((a, b) => a - b);
  return console.log(JSON.stringify({ n: lat.length, p50: lat[Math.floor(lat.length / 2)], p90: lat[Math.floor(lat.length * 0.9)] }));
  }
  const agent = new https.Agent({ keepAlive: true, maxSockets: 100 });
  let n = 0; const end = Date.now() + ${RPS_SECONDS * 1000};
  await Promise.all(Array.from({ length: 100 }, async () => { while (Date.now() < end) { await get(agent); n++; } }));
  console.log(JSON.stringify({ n, rps: n / ${RPS_SECONDS} }));
})().catch((e) => { console.log(JSON.stringify({ error: String(e) })); });
`;

/** A process's CPU time so far in µs (user + system, clock ticks of 10 ms). */
const cpuUs = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10_000;
};

/** The server's egress child (runtime/egress/child.js), the process every policed connection goes through. */
function egressChildPid(serverPid) {
  for (const tid of readdirSync(`/proc/${serverPid}/task`))
    for (const pid of readFileSync(`/proc/${serverPid}/task/${tid}/children`, 'utf8')
      .split(' ')
      .filter(Boolean))
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('egress/child')) return Number(pid);
  return undefined;
}

const sh = (cmd, args, input) =>
  execFileSync(cmd, args, { input, stdio: ['pipe', 'pipe', 'pipe'] }).toString();

function startUpstream(dir) {
  try {
    sh('ip', ['netns', 'del', NS]);
  } catch {}
  try {
    sh('ip', ['link', 'del', HOST_IF]);
  } catch {}
  selfSignedCert(dir, 'bench.test', true);
  sh(
    'ip',
    ['-batch', '-'],
    `netns add ${NS}\nlink add ${HOST_IF} type veth peer name eth0 netns ${NS}\naddr add ${UP_HOST}/24 dev ${HOST_IF}\nlink set ${HOST_IF} up\n`,
  );
  sh(
    'ip',
    ['-n', NS, '-batch', '-'],
    `link set lo up\naddr add ${UP}/24 dev eth0\nlink set eth0 up\nroute add default via ${UP_HOST}\n`,
  );
  // Nothing is sent unless the upstream's address leads into this bench's own namespace.
  if (!sh('ip', ['-o', 'route', 'get', UP]).includes(`dev ${HOST_IF} `))
    throw new Error(`${UP} is not routed to ${HOST_IF}`);
  const require = createRequire(import.meta.url);
  const proc = spawn('nsenter', [`--net=/run/netns/${NS}`, process.execPath, '-e', UPSTREAM], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...process.env,
      KEY: join(dir, 'key.pem'),
      CERT: join(dir, 'cert.pem'),
      DNS_PACKET: require.resolve('dns-packet'),
    },
  });
  return new Promise((resolve) => proc.stdout.once('data', () => resolve(proc)));
}

export async function benchEgress() {
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-egress-'));
  const upstream = await startUpstream(dir);
  const berth = await startSandboxBerth({
    BERTH_EGRESS_RESOLVERS: UP,
    // The upstream sits on the benchmarking range, reserved: opened as a LAN would be.
    BERTH_SANDBOX_ALLOW_CIDRS: UP_CIDR,
    NODE_EXTRA_CA_CERTS: join(dir, 'cert.pem'),
    BERTH_STANDBY_AFTER: '600',
    BERTH_LOG_LEVEL: 'warn',
  });
  const certPem = readFileSync(join(dir, 'cert.pem'), 'utf8');
  try {
    const run = async (name, network) => {
      await berth.create(name, network ? { network } : {});
      const exec = (command) =>
        berth.call('POST', `${berth.sandboxPath(name)}/process`, {
          command,
          waitForCompletion: true,
          timeout: 120,
        });
      await exec(`cat > /tmp/up-ca.pem <<'EOF'\n${certPem}EOF\ncat > /tmp/b.js <<'EOF'\n${CLIENT}\nEOF`);
      const proxyPid = egressChildPid(berth.pid);
      // CPU per request of the proxy (the egress child; none on the direct path) and of the upstream.
      const phase = async (arg) => {
        const p0 = proxyPid ? cpuUs(proxyPid) : 0;
        const u0 = cpuUs(upstream.pid);
        const out = await exec(`node /tmp/b.js ${arg}`);
        const r = JSON.parse(out.stdout.trim().split('\n').at(-1));
        if (r.error) throw new Error(`${name}: ${r.error}`);
        r.proxyCpuUs = proxyPid ? (cpuUs(proxyPid) - p0) / r.n : 0;
        r.upstreamCpuUs = (cpuUs(upstream.pid) - u0) / r.n;
        return r;
      };
      if (WARMUP_N) await exec(`node /tmp/b.js lat ${WARMUP_N}`);
      const lat = await phase(`lat ${LATENCY_N}`);
      const rps = await phase('rps');
      return { p50: lat.p50, p90: lat.p90, rps: rps.rps, lat, ka: rps };
    };
    const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
    const direct = await run('bench-direct');
    const opaque = await run('bench-opaque', { allowedDomains: ['bench.test'] });
    const routed = await run('bench-routed', {
      allowedDomains: ['bench.test'],
      proxy: {
        routing: [
          { destinations: ['bench.test'], headers: { 'x-key': '{{SECRET:k}}' }, secrets: { k: 'v' } },
        ],
      },
    });
    console.log(`load average at start ${load}`);
    header('sandbox egress: new-connection HTTPS GET from inside a sandbox');
    row('p50 latency, direct (no policy)', direct.p50, direct.p50, 'ms');
    row('p50 latency, opaque tunnel (allow list)', opaque.p50, direct.p50, 'ms', 'added <= 0.5 ms');
    row('p50 latency, intercepted (routing rule)', routed.p50, direct.p50, 'ms', 'added <= 2 ms');
    row('p90 latency, opaque tunnel', opaque.p90, direct.p90, 'ms');
    row('p90 latency, intercepted', routed.p90, direct.p90, 'ms');
    header('sandbox egress: requests per second over 100 keep-alive connections');
    row('rps, opaque tunnel vs direct', opaque.rps, direct.rps, 'req/s', '>= 0.7');
    row('rps, intercepted vs direct', routed.rps, direct.rps, 'req/s', '>= 0.7');
    header("sandbox egress: proxy CPU (egress child, /proc) against the upstream's own, direct run");
    row('CPU per new connection, opaque', opaque.lat.proxyCpuUs, direct.lat.upstreamCpuUs, 'µs');
    row('CPU per new connection, intercepted', routed.lat.proxyCpuUs, direct.lat.upstreamCpuUs, 'µs');
    row('CPU per kept-alive request, opaque', opaque.ka.proxyCpuUs, direct.ka.upstreamCpuUs, 'µs');
    row('CPU per kept-alive request, intercepted', routed.ka.proxyCpuUs, direct.ka.upstreamCpuUs, 'µs');
    // The same against the upstream's CPU in the same phase: both slowed alike by whatever else runs.
    header("sandbox egress: proxy CPU against the upstream's in the same phase");
    row('CPU per kept-alive request, opaque', opaque.ka.proxyCpuUs, opaque.ka.upstreamCpuUs, 'µs');
    row('CPU per kept-alive request, intercepted', routed.ka.proxyCpuUs, routed.ka.upstreamCpuUs, 'µs');
  } finally {
    await berth.stop();
    upstream.kill('SIGKILL');
    try {
      sh('ip', ['netns', 'del', NS]);
    } catch {}
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchEgress();
