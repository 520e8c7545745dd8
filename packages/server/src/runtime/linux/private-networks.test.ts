// Private networks around the host are closed to sandboxes unless the server opens them (allowCidrs). The "LAN"
// here is a network namespace this test makes, joined to the host by a veth with RFC 1918 and CGNAT addresses:
// no packet leaves this machine.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { SandboxInfo, SandboxSpec } from '../driver.js';
import { run, sleep } from './exec.js';
import { createLinuxDriver, type LinuxDriver } from './linux-driver.js';
import { rulesetText } from './network.js';
import { makeMiniDaemonCodeDir, sandboxExec } from './test-support/mini-daemon.js';

const T = { timeout: 120_000 };
const NS = 'berth-t-lan';
const HOST_IF = 'btlan0';
const LAN = { host: '192.168.251.1', peer: '192.168.251.2', cidr: '192.168.251.0/24' };
const CGNAT = { host: '100.64.251.1', peer: '100.64.251.2', cidr: '100.64.251.0/24' };
const PORT = 7071;

let dataDir: string;
let codeDir: string;
let lanServer: ChildProcess;
let hostServer: Server;

const spec: SandboxSpec = {
  memoryMb: 128,
  pidsMax: 64,
  cpuShares: 128,
  diskMb: 16,
  envs: {},
  image: '',
  volumes: [],
};

/** What a TCP connect from inside the sandbox gets: CONNECTED, an errno code, or TIMEOUT (dropped). */
const probe = async (info: SandboxInfo, host: string, port: number) =>
  (
    await sandboxExec(
      info.socketPath,
      `node -e 'const s=require("net").connect(${port},"${host}");setTimeout(()=>{console.log("TIMEOUT");process.exit(0)},1500);` +
        `s.on("connect",()=>{console.log("CONNECTED");process.exit(0)});s.on("error",(e)=>{console.log(e.code);process.exit(0)})'`,
    )
  ).stdout.trim();

const hostConnects = (host: string, port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect(port, host);
    s.setTimeout(1500, () => {
      s.destroy();
      resolve(false);
    });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });

async function deleteLan(): Promise<void> {
  await run('ip', ['netns', 'del', NS]).catch(() => undefined);
  await run('ip', ['link', 'del', HOST_IF]).catch(() => undefined);
}

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'berth-lan-'));
  codeDir = makeMiniDaemonCodeDir(dataDir);
  await deleteLan();
  await run(
    'ip',
    ['-batch', '-'],
    [
      `netns add ${NS}`,
      `link add ${HOST_IF} type veth peer name eth0 netns ${NS}`,
      `addr add ${LAN.host}/24 dev ${HOST_IF}`,
      `addr add ${CGNAT.host}/24 dev ${HOST_IF}`,
      `link set ${HOST_IF} up`,
      '',
    ].join('\n'),
  );
  await run(
    'ip',
    ['-n', NS, '-batch', '-'],
    [
      'link set lo up',
      `addr add ${LAN.peer}/24 dev eth0`,
      `addr add ${CGNAT.peer}/24 dev eth0`,
      'link set eth0 up',
      '',
    ].join('\n'),
  );
  lanServer = spawn(
    'nsenter',
    [
      `--net=/run/netns/${NS}`,
      process.execPath,
      '-e',
      `require("net").createServer((s)=>{s.on("error",()=>{});s.end("lan")}).listen(${PORT})`,
    ],
    { stdio: 'ignore' },
  );
  hostServer = await new Promise<Server>((resolve) => {
    const srv = createServer((_q, r) => r.end('host'));
    srv.listen(PORT, LAN.host, () => resolve(srv));
  });
  for (let i = 0; !(await hostConnects(LAN.peer, PORT)); i++) {
    if (i > 100) throw new Error('the test LAN server did not start');
    await sleep(50);
  }
});

after(async () => {
  lanServer?.kill('SIGKILL');
  hostServer?.close();
  await deleteLan();
  // Leave the host-wide table as a driver with no setting makes it.
  const d = await createLinuxDriver({ dataDir, codeDir, netPoolSize: 0 });
  await d.close();
  rmSync(dataDir, { recursive: true, force: true });
});

async function withSandbox(driver: LinuxDriver, id: string, fn: (info: SandboxInfo) => Promise<void>) {
  try {
    await fn(await driver.ensure(id, spec));
  } finally {
    await driver.remove(id);
    await driver.close();
  }
}

test(
  'by default a sandbox reaches neither a private LAN, nor a CGNAT range, nor the host on them',
  T,
  async () => {
    assert.ok(await hostConnects(LAN.peer, PORT), 'control: the host itself reaches the LAN');
    assert.ok(await hostConnects(CGNAT.peer, PORT), 'control: and the CGNAT address');
    const driver = await createLinuxDriver({ dataDir, codeDir, netPoolSize: 0 });
    await withSandbox(driver, 'closed', async (info) => {
      assert.equal(await probe(info, LAN.peer, PORT), 'TIMEOUT', 'RFC 1918 is dropped');
      assert.equal(await probe(info, CGNAT.peer, PORT), 'TIMEOUT', 'CGNAT is dropped');
      assert.equal(await probe(info, LAN.host, PORT), 'TIMEOUT', "the host's own LAN address is dropped");
    });
  },
);

test('ranges named in allowCidrs are reachable; the host itself still is not', T, async () => {
  const driver = await createLinuxDriver({
    dataDir,
    codeDir,
    netPoolSize: 0,
    allowCidrs: [LAN.cidr, CGNAT.cidr],
  });
  await withSandbox(driver, 'open', async (info) => {
    assert.equal(await probe(info, LAN.peer, PORT), 'CONNECTED');
    assert.equal(await probe(info, CGNAT.peer, PORT), 'CONNECTED');
    assert.equal(await probe(info, LAN.host, PORT), 'TIMEOUT', 'the host is never reachable');
  });
});

test('the ruleset lets the resolvers through on port 53 only, before the private ranges are dropped', () => {
  const text = rulesetText(false, { dnsServers: ['10.255.255.53', 'fe80::1'], allowCidrs: [] });
  assert.match(text, /set dns_dst \{\s+type ipv4_addr\s+elements = \{ 10\.255\.255\.53 \}/);
  const dns = text.indexOf('@dns_dst meta l4proto { tcp, udp } th dport 53 accept');
  const blocked = text.indexOf('@blocked_dst counter drop');
  assert.ok(dns > 0 && blocked > dns, 'the resolver rule comes first');
  assert.doesNotMatch(text, /fe80/, 'IPv6 resolvers are not IPv4 set elements');
});
