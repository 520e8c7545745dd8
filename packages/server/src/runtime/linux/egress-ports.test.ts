// Egress ports per server: two servers on one host (two data dirs) never share them, and a server keeps its own
// across restarts (they are in its sandboxes' HTTP_PROXY). No root needed: only ports are bound.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { egressPortsFor } from './egress-ports.js';
import { egressTableText } from './network.js';

const listen = (port: number) =>
  new Promise<Server>((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(port, '0.0.0.0', () => resolve(s));
  });

test('a second data dir gets other egress ports while the first server holds its own; each keeps its ports', async () => {
  const a = mkdtempSync(join(tmpdir(), 'berth-ports-a-'));
  const b = mkdtempSync(join(tmpdir(), 'berth-ports-b-'));
  const held: Server[] = [];
  try {
    const first = await egressPortsFor(a);
    // The first server runs: its four ports are taken.
    for (const p of [first.explicit, first.tls, first.http, first.dns]) held.push(await listen(p));
    const second = await egressPortsFor(b);
    const mine = new Set([first.explicit, first.tls, first.http, first.dns]);
    for (const p of [second.explicit, second.tls, second.http, second.dns])
      assert.ok(!mine.has(p), `${p} shared`);
    assert.equal(new Set(Object.values(second)).size, 4, 'four distinct ports');
    assert.deepEqual(await egressPortsFor(a), first, 'kept across restarts, even while in use');
    assert.deepEqual(await egressPortsFor(b), second);
  } finally {
    for (const s of held) s.close();
    rmSync(a, { recursive: true, force: true });
    rmSync(b, { recursive: true, force: true });
  }
});

test("each server's nftables chain redirects to its own ports, and only its policed sandboxes jump there", () => {
  const text = egressTableText({ explicit: 20001, tls: 20002, http: 20003, dns: 20004 });
  assert.match(text, /add rule inet berth_egress server_20001 tcp dport 443 .*redirect to :20002/);
  assert.match(text, /server_20001 tcp dport 80 .*redirect to :20003/);
  assert.match(text, /server_20001 meta l4proto \{ tcp, udp \} th dport 53 .*redirect to :20004/);
  assert.match(text, /prerouting iifname "bh\*" ip saddr vmap @owners/);
  // The ports are refused to the host by the egress child once it listens (holdEgressPorts), not at table setup:
  // a server killed before its child ran would leave them refused.
  assert.doesNotMatch(text, /add element inet berth_egress server_ports/);
  assert.doesNotMatch(text, /15443|15128/, 'no fixed port left');
});
