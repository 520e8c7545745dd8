// `/port/{n}` end to end: the gateway reaches a server inside a real sandbox straight at the sandbox's address,
// whether it listens on loopback or on every address, streams bodies and upgrades both ways, and nobody but
// root on the host, and no other sandbox, can open those connections.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { sandboxId } from '../../src/runtime/sandbox-id.js';
import { slotNet } from '../../src/runtime/linux/network.js';
import { readRecord } from '../../src/runtime/linux/state.js';
import { exec, inspectingDriver, type SandboxServer, startSandboxServer } from './support.js';

const run = promisify(execFile);

/** Answers every request with what it saw, and echoes the bytes of any upgraded connection back. */
const SERVER = (port: number, host: string) =>
  `node -e "
const s = require('http').createServer((q, r) => { let b = ''; q.on('data', (c) => (b += c)); q.on('end', () =>
  r.end(JSON.stringify({ port: ${port}, method: q.method, url: q.url, headers: q.headers, body: b }))); });
s.on('upgrade', (q, sock) => { sock.write('HTTP/1.1 101 Switching Protocols\\r\\nupgrade: echo\\r\\nconnection: upgrade\\r\\n\\r\\n'); sock.pipe(sock); });
s.listen(${port}, '${host}');"`;

describe('sandbox ports through the gateway', () => {
  let s: SandboxServer;
  let base: string;
  let address: string;

  before(async () => {
    s = await startSandboxServer();
    await s.create('ports');
    await s.create('ports-other');
    base = `${s.url}/run/default/sandboxes/ports`;
    for (const [port, host] of [
      [8000, '127.0.0.1'],
      [8001, '0.0.0.0'],
    ] as const) {
      const res = await s.run(`${base}/process`, {
        method: 'POST',
        json: { command: SERVER(port, host), name: `web-${port}`, waitForPorts: [port] },
      });
      assert.equal(res.status, 200, await res.text());
    }
    const driver = await inspectingDriver(s.dataDir);
    address = (await driver.inspect(sandboxId('default', 'ports')))!.address;
    await driver.close();
  });
  after(() => s?.close());

  it('reaches a loopback-only server with its path, query, body and a Host it knows; no Berth credential', async () => {
    const res = await s.run(`${base}/port/8000/some/path?x=1`, { method: 'POST', body: 'hello' });
    assert.equal(res.status, 200);
    const seen = await res.json();
    assert.equal(seen.port, 8000);
    assert.equal(seen.url, '/some/path?x=1');
    assert.equal(seen.body, 'hello');
    assert.equal(seen.headers.host, 'localhost:8000');
    assert.equal(seen.headers['x-forwarded-host'], new URL(s.url).host);
    assert.equal(seen.headers['x-blaxel-authorization'], undefined);
    const bare = await s.run(`${base}/port/8000`);
    assert.equal((await bare.json()).url, '/');
  });

  it('reaches a server listening on every address', async () => {
    const res = await s.run(`${base}/port/8001/`);
    assert.equal(res.status, 200);
    assert.equal((await res.json()).port, 8001);
  });

  it('says 502 with the port when nothing listens there', async () => {
    const res = await s.run(`${base}/port/8002/`);
    assert.equal(res.status, 502);
    assert.match(res.headers.get('content-type') ?? '', /problem\+json/);
    assert.match((await res.json()).detail, /nothing answered on port 8002/);
  });

  it('tunnels an upgrade to the port', async () => {
    const echoed = await new Promise<string>((resolve, reject) => {
      const req = request(`${base}/port/8000/ws`, {
        headers: {
          connection: 'upgrade',
          upgrade: 'echo',
          'x-blaxel-authorization': `Bearer ${s.adminKey}`,
        },
      });
      req.on('upgrade', (res, socket) => {
        assert.equal(res.statusCode, 101);
        socket.once('data', (d) => {
          resolve(d.toString());
          socket.destroy();
        });
        socket.write('ping');
      });
      req.on('response', (res) => reject(new Error(`no upgrade: ${res.statusCode}`)));
      req.on('error', reject);
      req.end();
    });
    assert.equal(echoed, 'ping');
  });

  it('lets root on the host connect to the address, and no other host user', async () => {
    const { stdout } = await run('curl', ['-sS', '-m', '5', `http://${address}:8000/direct`]);
    assert.equal(JSON.parse(stdout).url, '/direct');
    const nobody = run('setpriv', [
      '--reuid=65534',
      '--regid=65534',
      '--clear-groups',
      'curl',
      '-sS',
      '-m',
      '5',
      `http://${address}:8000/`,
    ]);
    await assert.rejects(nobody, /Connection refused|Failed to connect|timed out/);
  });

  it('gives a sandbox that lost its ingress rule (one made by an older server) its ports back at start', async () => {
    const rec = readRecord(join(s.dataDir, 'sandboxes', sandboxId('default', 'ports')))!;
    await run('nsenter', [
      `--net=${slotNet(rec.slot, rec.name).netnsPath}`,
      'nft',
      'delete',
      'table',
      'ip',
      'berth_ingress',
    ]);
    const lost = await s.run(`${base}/port/8000/`);
    assert.equal(lost.status, 502, 'without the rule a loopback-only server is out of reach');
    const driver = await inspectingDriver(s.dataDir);
    await driver.close(); // waits for the start-up pass
    const back = await s.run(`${base}/port/8000/`);
    assert.equal(back.status, 200);
  });

  it('keeps another sandbox away from the loopback server', async () => {
    const probe = `node -e "require('net').connect(8000, '${address}').on('connect', () => { console.log('connected'); process.exit(0); }).on('error', (e) => { console.log(e.code); process.exit(1); }); setTimeout(() => { console.log('timeout'); process.exit(1); }, 3000)"`;
    const r = await exec(s, `${s.url}/run/default/sandboxes/ports-other`, probe);
    assert.notEqual(r.exitCode, 0, JSON.stringify(r));
    assert.doesNotMatch(r.logs ?? r.stdout ?? '', /connected/);
  });
});
