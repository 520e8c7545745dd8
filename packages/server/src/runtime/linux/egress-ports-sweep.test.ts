// The host's refused set of egress ports (`inet berth_egress` server_ports) holds only ports a live egress child
// listens on: a port left there by a child killed with its server would silently drop the connections of the
// next program that binds it (any loopback server on an ephemeral port). Needs root (nft).
import assert from 'node:assert/strict';
import { createServer, type Server, connect } from 'node:net';
import { test } from 'node:test';
import { run } from './exec.js';
import { holdEgressPorts, releaseEgressPorts, sweepEgressPorts } from './network.js';

const listen = () =>
  new Promise<Server>((resolve) => {
    const s = createServer((c) => c.end('hi'));
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
const port = (s: Server) => (s.address() as { port: number }).port;
const inSet = async (p: number) =>
  (await run('nft', ['list', 'set', 'inet', 'berth_egress', 'server_ports'])).match(
    new RegExp(`\\b${p}\\b`),
  ) !== null;
/** Connects over loopback: 'hi' when the server answered, 'timeout' when the SYN was dropped. */
const reach = (p: number) =>
  new Promise<string>((resolve) => {
    const c = connect(p, '127.0.0.1');
    const t = setTimeout(() => {
      c.destroy();
      resolve('timeout');
    }, 1_500);
    c.on('data', (d) => {
      clearTimeout(t);
      c.destroy();
      resolve(d.toString());
    });
    c.on('error', (e) => {
      clearTimeout(t);
      resolve((e as { code?: string }).code ?? 'error');
    });
  });

test('a port a dead egress child left in the refused set is swept; a live one is kept', async () => {
  await run(
    'nft',
    ['-f', '-'],
    'add table inet berth_egress\nadd set inet berth_egress server_ports { type inet_service; }\n',
  );
  const live = await listen();
  const gone = await listen();
  const dead = port(gone);
  await new Promise<void>((r) => gone.close(() => r()));
  // Two fake children: one still listening on all its ports, one whose ports nothing holds any more.
  const liveSet = { explicit: port(live), tls: port(live), http: port(live), dns: port(live) };
  const deadSet = { explicit: dead, tls: dead, http: dead, dns: dead };
  try {
    await holdEgressPorts(liveSet);
    await holdEgressPorts(deadSet);
    assert.equal(await reach(port(live)), 'timeout', 'a held port refuses loopback callers');
    // (Another server starting meanwhile sweeps too: the set, not this call's answer, is what counts.)
    assert.ok(!(await sweepEgressPorts()).includes(port(live)));
    assert.ok(await inSet(port(live)), 'the live port stays refused');
    assert.ok(!(await inSet(dead)), 'the dead port is swept');
    // What the leak broke: a server that later binds the dead port is reachable.
    const next = createServer((c) => c.end('hi'));
    await new Promise<void>((r, j) => next.once('error', j).listen(dead, '127.0.0.1', () => r()));
    assert.equal(await reach(dead), 'hi');
    next.close();
    await releaseEgressPorts(liveSet);
    assert.ok(!(await inSet(port(live))), 'released');
  } finally {
    await releaseEgressPorts(deadSet);
    await releaseEgressPorts(liveSet);
    live.close();
  }
});
