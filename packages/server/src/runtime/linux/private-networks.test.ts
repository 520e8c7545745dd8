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
import { outermostCidrs, privateTableText, rulesetText } from './network.js';
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
  rmSync(dataDir, { recursive: true, force: true });
});

/** A driver on a data dir of its own (another server on this host), removed with the test. */
async function otherServer(t: { after: (fn: () => void) => void }, allowCidrs: string[], netPoolSize = 0) {
  const dir = mkdtempSync(join(tmpdir(), 'berth-lan-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return createLinuxDriver({ dataDir: dir, codeDir, netPoolSize, allowCidrs });
}

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
    allowCidrs: [LAN.cidr, CGNAT.cidr, '192.168.251.0/25'], // a range inside another is taken as the outer one
  });
  await withSandbox(driver, 'open', async (info) => {
    assert.equal(await probe(info, LAN.peer, PORT), 'CONNECTED');
    assert.equal(await probe(info, CGNAT.peer, PORT), 'CONNECTED');
    assert.equal(await probe(info, LAN.host, PORT), 'TIMEOUT', 'the host is never reachable');
  });
});

test('a sandbox stays closed while another server opening the ranges starts', T, async (t) => {
  const driver = await createLinuxDriver({ dataDir, codeDir, netPoolSize: 0 });
  await withSandbox(driver, 'closed-2', async (info) => {
    const other = await otherServer(t, [LAN.cidr, CGNAT.cidr]);
    await other.close();
    assert.equal(await probe(info, LAN.peer, PORT), 'TIMEOUT', 'RFC 1918 is still dropped');
    assert.equal(await probe(info, CGNAT.peer, PORT), 'TIMEOUT', 'CGNAT is still dropped');
    assert.equal(await probe(info, LAN.host, PORT), 'TIMEOUT', "the host's own LAN address is still dropped");
  });
});

test("two servers' sandboxes each reach their own server's ranges and not the other's", T, async (t) => {
  const a = await otherServer(t, [LAN.cidr]);
  const infoA = await a.ensure('lan-only', spec);
  t.after(() => a.remove('lan-only').then(() => a.close()));
  const b = await otherServer(t, [CGNAT.cidr], 1); // started after A's sandbox exists
  await b.poolsIdle();
  assert.equal(b.netPool.readyCount, 1, "B's sandbox takes a network made ahead of time");
  const infoB = await b.ensure('cgnat-only', spec);
  try {
    assert.equal(await probe(infoA, LAN.peer, PORT), 'CONNECTED', "A's range");
    assert.equal(await probe(infoA, CGNAT.peer, PORT), 'TIMEOUT', "B's range is not A's");
    assert.equal(await probe(infoB, CGNAT.peer, PORT), 'CONNECTED', "B's range");
    assert.equal(await probe(infoB, LAN.peer, PORT), 'TIMEOUT', "A's range is not B's");
  } finally {
    await b.remove('cgnat-only');
    await b.close();
  }
  // B's sandbox and B are gone, and a third server with no setting started: A's sandbox is as it was.
  const c = await otherServer(t, []);
  await c.close();
  assert.equal(await probe(infoA, LAN.peer, PORT), 'CONNECTED', "A's range survives the others");
  assert.equal(await probe(infoA, CGNAT.peer, PORT), 'TIMEOUT');
});

test(
  'the next start of a data dir gives its running sandboxes its setting (a killed server left its own)',
  T,
  async () => {
    // The first driver is never closed: what a kill -9 leaves, with its sandbox still running.
    const dead = await createLinuxDriver({ dataDir, codeDir, netPoolSize: 0, allowCidrs: [LAN.cidr] });
    const info = await dead.ensure('adopted', spec);
    assert.equal(await probe(info, LAN.peer, PORT), 'CONNECTED', 'control: opened by the first run');
    const next = await createLinuxDriver({ dataDir, codeDir, netPoolSize: 0, allowCidrs: [CGNAT.cidr] });
    try {
      await next.close(); // waits for the start-up pass over running sandboxes; they keep running
      assert.equal(await probe(info, LAN.peer, PORT), 'TIMEOUT', "the killed run's range is closed");
      assert.equal(await probe(info, CGNAT.peer, PORT), 'CONNECTED', "this run's range is open");
    } finally {
      await withSandbox(
        await createLinuxDriver({ dataDir, codeDir, netPoolSize: 0 }),
        'adopted',
        async () => {},
      );
    }
  },
);

test('removing a sandbox removes its ranges from the host', T, async () => {
  const driver = await createLinuxDriver({ dataDir, codeDir, netPoolSize: 0, allowCidrs: [LAN.cidr] });
  let address = '';
  await withSandbox(driver, 'gone', async (info) => {
    address = info.address;
    assert.match(await allowedSet(), new RegExp(`${address.replaceAll('.', '\\.')} \\. ${LAN.cidr}`));
  });
  assert.doesNotMatch(await allowedSet(), new RegExp(`${address.replaceAll('.', '\\.')} \\.`));
});

const allowedSet = () => run('nft', ['list', 'set', 'inet', 'berth_private', 'allowed']);

test('the private-range table lets the resolvers through on port 53 only, before the private ranges are dropped', () => {
  const text = privateTableText(['10.255.255.53', 'fe80::1']);
  assert.match(text, /add element inet berth_private dns_dst \{ 10\.255\.255\.53 \}/);
  const dns = text.indexOf('@dns_dst meta l4proto { tcp, udp } th dport 53 accept');
  const allowed = text.indexOf('ip saddr . ip daddr @allowed accept');
  const blocked = text.indexOf('@blocked_dst counter drop');
  assert.ok(
    dns > 0 && allowed > dns && blocked > allowed,
    'the resolvers, then the opened ranges, then the drop',
  );
  assert.doesNotMatch(text, /fe80/, 'IPv6 resolvers are not IPv4 set elements');
  assert.doesNotMatch(
    text,
    /delete table|flush set inet berth_private allowed/,
    "a start keeps every server's ranges",
  );
  assert.doesNotMatch(
    rulesetText(false),
    /blocked_dst|allowed/,
    'the table every start rebuilds holds none of it',
  );
});

test('nested ranges are reduced to the outer one', () => {
  assert.deepEqual(
    outermostCidrs(['192.168.1.0/24', '10.0.0.0/8', '192.168.0.0/16', '10.1.2.3/32', '10.0.0.0/8']),
    ['10.0.0.0/8', '192.168.0.0/16'],
  );
  assert.deepEqual(outermostCidrs(['10.0.0.1/32', '10.0.0.2/32']), ['10.0.0.1/32', '10.0.0.2/32']);
});
