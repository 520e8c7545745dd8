// Egress policy end to end: a real sandbox under a policy, upstreams in a namespace this test makes (upstream
// address in the benchmarking range, see test-support/egress-upstream.ts). Allowed names work through the explicit
// proxy and transparently; everything else, including every way around the proxy, fails and the upstream counts no hit.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { EgressPolicy, SandboxInfo, SandboxSpec } from '../driver.js';
import type { EgressEvent } from '../egress/supervisor.js';
import { run, sleep } from './exec.js';
import { createLinuxDriver, type LinuxDriver } from './linux-driver.js';
import { startUpstream, UPSTREAM, type Upstream } from './test-support/egress-upstream.js';
import { makeMiniDaemonCodeDir, sandboxExec } from './test-support/mini-daemon.js';

const T = { timeout: 120_000 };
let dataDir: string;
let codeDir: string;
let up: Upstream;
let driver: LinuxDriver;
const events: EgressEvent[] = [];

const policy: EgressPolicy = {
  allowedDomains: ['allowed.test', '*.allowed.test'],
  forbiddenDomains: ['sub.allowed.test'],
};
const spec = (egress?: EgressPolicy): SandboxSpec => ({
  memoryMb: 128,
  pidsMax: 64,
  cpuShares: 128,
  diskMb: 16,
  envs: {},
  image: '',
  volumes: [],
  egress,
});

const sh = async (info: SandboxInfo, cmd: string) => (await sandboxExec(info.socketPath, cmd)).stdout.trim();
/** curl's outcome: the HTTP status (000 when no HTTP answer came) and the exit code, e.g. "200 0" or "000 35". */
const curl = (info: SandboxInfo, args: string) =>
  sh(info, `curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert /tmp/ca.pem ${args}; echo " $?"`);
/** A TCP or UDP probe from inside: CONNECTED / ANSWERED, an errno code, or TIMEOUT (dropped). */
const tcpProbe = (info: SandboxInfo, host: string, port: number) =>
  sh(
    info,
    `node -e 'const s=require("net").connect(${port},"${host}");setTimeout(()=>{console.log("TIMEOUT");process.exit(0)},1500);` +
      `s.on("connect",()=>{console.log("CONNECTED");process.exit(0)});s.on("error",(e)=>{console.log(e.code);process.exit(0)})'`,
  );
const resolveInside = (info: SandboxInfo, name: string) =>
  sh(info, `node -e 'require("dns").resolve4("${name}",(e,a)=>console.log(e?e.code:a.join(",")))'`);

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'berth-egress-'));
  codeDir = makeMiniDaemonCodeDir(dataDir);
  up = await startUpstream();
  writeFileSync(join(dataDir, 'upstream-ca.pem'), up.certPem);
  driver = await createLinuxDriver({
    egressUpstreamCaFile: join(dataDir, 'upstream-ca.pem'),
    dataDir,
    codeDir,
    netPoolSize: 0,
    egressResolvers: [UPSTREAM.address],
    egressGateways: { gw: [UPSTREAM.gateway] },
    allowCidrs: [UPSTREAM.cidr], // a benchmarking range, reserved, standing for the internet
    onEgressEvent: (e) => events.push(e),
  });
});

const heldPorts = async () => {
  const { ports } = (driver as unknown as { ctx: { egress: { ports: Record<string, number> } } }).ctx.egress;
  const set = await run('nft', ['list', 'set', 'inet', 'berth_egress', 'server_ports']);
  return Object.values(ports).filter((p) => new RegExp(`\\b${p}\\b`).test(set));
};

after(async () => {
  await driver?.close();
  assert.deepEqual(
    await heldPorts(),
    [],
    "a stopped server's egress ports are no longer refused to the host",
  );
  await up?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

/** The addresses this file's sandboxes had: other servers on the host (two test files run at once) police theirs. */
const used = new Set<string>();

async function withSandbox(
  id: string,
  egress: EgressPolicy | undefined,
  fn: (info: SandboxInfo) => Promise<void>,
) {
  const info = await driver.ensure(id, spec(egress));
  used.add(info.address);
  try {
    await sh(info, `printf '%s' '${up.certPem}' > /tmp/ca.pem`);
    await fn(info);
  } finally {
    await driver.remove(id);
  }
}

test('control: without a policy the sandbox reaches the test upstream directly', T, async () => {
  await withSandbox('egress-open', undefined, async (info) => {
    assert.equal(await tcpProbe(info, UPSTREAM.address, 22), 'CONNECTED');
  });
});

test('allowed names pass through the explicit proxy and transparently; others are refused', T, async () => {
  await withSandbox('egress-allow', policy, async (info) => {
    const hits = up.count('HIT');
    assert.equal(await curl(info, 'https://allowed.test/'), '200 0', 'explicit proxy (HTTPS_PROXY), CONNECT');
    assert.equal(await curl(info, 'http://allowed.test/'), '200 0', 'explicit proxy, absolute-form HTTP');
    assert.equal(await curl(info, "--noproxy '*' https://allowed.test/"), '200 0', 'transparent, by SNI');
    assert.equal(await curl(info, "--noproxy '*' http://allowed.test/"), '200 0', 'transparent, by Host');
    assert.equal(up.count('HIT'), hits + 4);
    assert.equal(await curl(info, 'https://denied.test/'), '000 56', 'CONNECT refused: 403 from the proxy');
    assert.equal(await curl(info, 'http://denied.test/'), '403 0');
    assert.equal(await curl(info, 'https://sub.allowed.test/'), '000 56', 'deny wins over a wildcard allow');
    assert.equal(up.count('HIT'), hits + 4, 'no refused request reached the upstream');
  });
});

test('every way around the proxy fails, and the upstream sees none of them', T, async () => {
  await withSandbox('egress-bypass', policy, async (info) => {
    const before = { hit: up.count('HIT'), conn: up.count('CONN'), dns: up.count('DNS denied') };
    // Pinning a denied name to the upstream's address: the transparent proxy reads SNI and Host, not the address.
    assert.notEqual(
      await curl(info, `--noproxy '*' --resolve denied.test:443:${UPSTREAM.address} https://denied.test/`),
      '200 0',
    );
    assert.notEqual(
      await curl(info, `--noproxy '*' --resolve denied.test:80:${UPSTREAM.address} http://denied.test/`),
      '200 0',
    );
    // TLS with no server name at all (an IP literal) and a CONNECT whose ClientHello names another host.
    assert.notEqual(await curl(info, `--noproxy '*' https://${UPSTREAM.address}/`), '200 0');
    assert.notEqual(
      await curl(info, `--connect-to denied.test:443:allowed.test:443 https://denied.test/`),
      '200 0',
      'SNI must equal the CONNECT host',
    );
    assert.equal(await tcpProbe(info, UPSTREAM.address, 22), 'TIMEOUT', 'raw TCP is dropped');
    assert.equal(await tcpProbe(info, UPSTREAM.address, 853), 'TIMEOUT', 'DNS over TLS is dropped');
    assert.equal(await tcpProbe(info, UPSTREAM.address, 25), 'TIMEOUT', 'SMTP is dropped');
    assert.notEqual(await tcpProbe(info, '2001:db8::1', 443), 'CONNECTED', 'no IPv6 route');
    // DNS: every query, to whatever server, is answered by Berth; denied names never reach the upstream.
    assert.equal(await resolveInside(info, 'allowed.test'), UPSTREAM.address);
    assert.equal(await resolveInside(info, 'denied.test'), 'ENOTFOUND');
    const direct = await sh(
      info,
      `node -e 'const r=new (require("dns").Resolver)();r.setServers(["${UPSTREAM.address}"]);r.resolve4("denied.test",(e,a)=>console.log(e?e.code:a.join(",")))'`,
    );
    assert.equal(direct, 'ENOTFOUND', 'a query sent straight to the upstream resolver is answered by Berth');
    assert.equal(up.count('HIT'), before.hit, 'no HTTP(S) hit');
    assert.equal(up.count('CONN'), before.conn, 'no raw connection');
    assert.equal(
      up.count('DNS denied'),
      before.dns,
      'no query for a denied name reached the upstream resolver',
    );
  });
});

test(
  'a narrowed policy refuses new connections and closes open ones; widening applies at once',
  T,
  async () => {
    await withSandbox('egress-live', policy, async (info) => {
      // A tunnel held open by a client that sends nothing after the CONNECT.
      await sandboxExec(
        info.socketPath,
        `node -e 'const u=new URL(process.env.HTTPS_PROXY);const s=require("net").connect(+u.port,u.hostname);` +
          `s.write("CONNECT allowed.test:443 HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n");s.on("data",()=>{});` +
          `s.on("close",()=>require("fs").writeFileSync("/tmp/closed",String(Date.now())))' > /dev/null 2>&1`,
        true,
      );
      for (
        let i = 0;
        !events.some(
          (e) => e.type === 'audit' && e.line.source === info.address && e.line.decision === 'allow',
        );
        i++
      ) {
        if (i > 200) throw new Error('the tunnel did not open');
        await sleep(25);
      }
      assert.equal(await sh(info, 'cat /tmp/closed 2>/dev/null || echo open'), 'open');
      await driver.setEgress('egress-live', { allowedDomains: ['other.test'], forbiddenDomains: [] });
      // The close is immediate; reading the sandbox's file for it takes an exec, slow on a loaded machine.
      let closed = 'open';
      for (const until = Date.now() + 10_000; Date.now() < until && closed === 'open'; ) {
        await sleep(50);
        closed = await sh(info, 'cat /tmp/closed 2>/dev/null || echo open');
      }
      assert.notEqual(closed, 'open', 'the tunnel to a name no longer allowed was closed');
      assert.equal(await curl(info, 'https://allowed.test/'), '000 56');
      assert.equal(await curl(info, 'https://other.test/'), '200 0');
      await driver.setEgress('egress-live', undefined);
      assert.equal(await tcpProbe(info, UPSTREAM.address, 22), 'CONNECTED', 'no policy: open egress again');
    });
  },
);

test('the egress child is restarted after a crash and its sandboxes keep their policy', T, async () => {
  await withSandbox('egress-crash', policy, async (info) => {
    const sup = (driver as unknown as { ctx: { egress: { supervisor: { pid?: number; starts: number } } } })
      .ctx.egress.supervisor;
    const starts = sup.starts;
    assert.equal((await heldPorts()).length, 4, "the child's four ports are refused to all but sandboxes");
    process.kill(sup.pid ?? 0, 'SIGKILL');
    assert.notEqual(await curl(info, "--noproxy '*' https://denied.test/"), '200 0', 'while down: refused');
    for (let i = 0; sup.starts === starts || !sup.pid; i++) {
      if (i > 200) throw new Error('not restarted');
      await sleep(25);
    }
    await sleep(100);
    assert.equal(await curl(info, 'https://allowed.test/'), '200 0');
    assert.equal(await curl(info, 'https://denied.test/'), '000 56');
    assert.equal((await heldPorts()).length, 4, 'the restarted child holds them again');
  });
});

const SECRET = 'sk-test-3f9a1c77-never-inside';
const routed: EgressPolicy = {
  allowedDomains: ['allowed.test', 'other.test', 'nosan.test'],
  forbiddenDomains: [],
  routing: [
    {
      destinations: ['allowed.test', 'nosan.test'],
      headers: { Authorization: 'Bearer {{SECRET:key}}' },
      body: { api_key: '{{SECRET:key}}' },
      secrets: { key: SECRET },
    },
  ],
};
/** What the upstream saw of one request made with curl inside the sandbox (its echo), or curl's failure. */
const echo = async (info: SandboxInfo, args: string) => {
  const out = await sh(info, `curl -sS --max-time 5 ${args} 2>&1`);
  try {
    return JSON.parse(out);
  } catch {
    return { failed: out };
  }
};

test('routed HTTPS requests get the secret added on the way out; the sandbox never holds it', T, async () => {
  await withSandbox('egress-inject', routed, async (info) => {
    // No --cacert: the sandbox trusts its own CA through the variables Berth sets (CURL_CA_BUNDLE, SSL_CERT_FILE).
    const viaProxy = await echo(info, "-H 'Authorization: Bearer mine' https://allowed.test/");
    assert.equal(viaProxy.headers?.authorization, `Bearer ${SECRET}`, JSON.stringify(viaProxy));
    assert.match(viaProxy.headers['x-berth-request-id'], /^[0-9a-f-]{36}$/);
    const transparent = await echo(info, "--noproxy '*' https://allowed.test/");
    assert.equal(transparent.headers?.authorization, `Bearer ${SECRET}`, 'transparent interception by SNI');
    const posted = await echo(
      info,
      `-X POST -H 'content-type: application/json' -d '{"mine":1,"api_key":"client"}' https://allowed.test/`,
    );
    assert.deepEqual(
      JSON.parse(posted.body),
      { mine: 1, api_key: SECRET },
      'JSON body merged, client fields kept',
    );
    const node = await sh(
      info,
      `node -e 'require("https").get("https://allowed.test/",{agent:new (require("https").Agent)()},(r)=>{let b="";r.on("data",(d)=>b+=d);r.on("end",()=>console.log(JSON.parse(b).headers.authorization))}).on("error",(e)=>console.log(e.code))'`,
    );
    assert.equal(node, `Bearer ${SECRET}`, "Node's own TLS trusts the sandbox CA (NODE_EXTRA_CA_CERTS)");
    assert.equal(
      (await echo(info, 'http://allowed.test/')).headers?.authorization,
      undefined,
      'never over plain HTTP',
    );
    assert.equal(
      (await echo(info, 'https://other.test/')).headers?.authorization,
      undefined,
      'unrouted: no secret',
    );
    assert.equal(
      await sh(info, `curl -s -o /dev/null -w '%{http_code}' --max-time 5 https://nosan.test/`),
      '502',
      'an upstream certificate not valid for the name is refused',
    );
    // Nowhere inside: environment of every process, the run dir and the writable layer.
    const found = await sh(
      info,
      `cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c '${SECRET}'; grep -rl '${SECRET}' /run /tmp /home 2>/dev/null | wc -l`,
    );
    assert.equal(found.replace(/\s+/g, ' '), '0 0');
  });
});

test('a rotated secret applies from the next request on', T, async () => {
  await withSandbox('egress-rotate', routed, async (info) => {
    assert.equal((await echo(info, 'https://allowed.test/')).headers?.authorization, `Bearer ${SECRET}`);
    const rotated = structuredClone(routed);
    rotated.routing![0].secrets = { key: 'sk-rotated' };
    await driver.setEgress('egress-rotate', rotated);
    assert.equal((await echo(info, 'https://allowed.test/')).headers?.authorization, 'Bearer sk-rotated');
  });
});

test(
  'a sandbox on an egress gateway reaches upstreams from the gateway address, proxied or intercepted',
  T,
  async () => {
    const gw: EgressPolicy = { ...routed, egressGateway: 'gw' };
    await withSandbox('egress-gateway', gw, async (info) => {
      assert.equal(
        (await echo(info, '--cacert /tmp/ca.pem https://other.test/')).from,
        `::ffff:${UPSTREAM.gateway}`,
        'opaque',
      );
      assert.equal((await echo(info, 'http://other.test/')).from, `::ffff:${UPSTREAM.gateway}`, 'plain HTTP');
      assert.equal(
        (await echo(info, 'https://allowed.test/')).from,
        `::ffff:${UPSTREAM.gateway}`,
        'intercepted',
      );
    });
    await withSandbox('egress-no-gateway', routed, async (info) => {
      assert.equal(
        (await echo(info, 'http://other.test/')).from,
        `::ffff:${UPSTREAM.host}`,
        'control: the host address',
      );
    });
  },
);

test(
  'a CIDR rule opens raw TCP to its range only, from the gateway address; SMTP stays closed',
  T,
  async () => {
    const raw: EgressPolicy = { ...policy, rawCidrs: [`${UPSTREAM.address}/32`], egressGateway: 'gw' };
    await withSandbox('egress-raw', raw, async (info) => {
      const before = up.count('CONN 22');
      assert.equal(await tcpProbe(info, UPSTREAM.address, 22), 'CONNECTED');
      for (let i = 0; up.count('CONN 22') === before && i < 100; i++) await sleep(20);
      assert.equal(
        up.lines.filter((l) => l.startsWith('CONN 22')).at(-1),
        `CONN 22 ::ffff:${UPSTREAM.gateway}`,
      );
      assert.equal(
        await tcpProbe(info, UPSTREAM.address, 25),
        'TIMEOUT',
        'SMTP is dropped, CIDR rule or not',
      );
      assert.equal(await tcpProbe(info, UPSTREAM.host, 22), 'TIMEOUT', 'outside the range: dropped');
    });
    const left = await run('nft', ['list', 'set', 'inet', 'berth_egress', 'raw_allowed']);
    assert.doesNotMatch(left, /10\.200\./, 'the rules go with the sandbox');
  },
);

test('an unknown egress gateway fails the sandbox with the reason', T, async () => {
  await assert.rejects(
    driver.ensure('egress-bad-gw', spec({ allowedDomains: [], forbiddenDomains: [], egressGateway: 'nope' })),
    /egress gateway nope is not configured/,
  );
  await driver.remove('egress-bad-gw');
});

test('nothing is left in the policed set once the sandboxes are gone', T, async () => {
  const set = await run('nft', ['list', 'set', 'inet', 'berth_egress', 'policed']);
  for (const a of used)
    assert.doesNotMatch(set, new RegExp(`\\b${a.replaceAll('.', '\\.')}\\b`), `${a} still policed`);
  // Nor any owner entry sending an address (one of a sandbox that failed to start among them) to this server's chain.
  const { ports } = (driver as unknown as { ctx: { egress: { ports: { explicit: number } } } }).ctx.egress;
  const owners = await run('nft', ['list', 'map', 'inet', 'berth_egress', 'owners']);
  assert.doesNotMatch(owners, new RegExp(`jump server_${ports.explicit}\\b`));
});
