// Requests sent on to the holder through a failover (peer-forward.ts sendToHolder): while no server holds what they are
// about, or the holder refused the connection before any byte left, they wait and are decided again at each read of
// the node list, then sent, body intact; a request a peer received is never sent again. The three-server flow is
// test/cluster/builds-ahead.test.ts.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ApiError } from '../errors.js';
import { type Holder, type HolderDecision, sendToHolder } from './peer-forward.js';
import { sendProblem } from './problem.js';

const listen = async (handler: (req: IncomingMessage, res: ServerResponse) => void) => {
  const s = createServer(handler);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return { server: s, url: new URL(`http://127.0.0.1:${(s.address() as AddressInfo).port}`) };
};

describe('requests sent on to the holder wait out a failover', () => {
  const servers: Server[] = [];
  let peer: URL;
  let dropping: URL;
  let refusing: URL;
  const received: string[] = [];
  before(async () => {
    const p = await listen((req, res) => {
      let body = '';
      req.on('data', (c) => {
        body += c;
      });
      req.on('end', () => {
        received.push(body);
        res.end(`peer got ${req.method} ${body}`);
      });
    });
    // Reads the request, then dies without answering: the request reached it.
    const d = await listen((req) => req.on('data', () => req.socket.destroy()));
    const gone = await listen(() => undefined);
    refusing = gone.url;
    await new Promise((r) => gone.server.close(r));
    servers.push(p.server, d.server);
    peer = p.url;
    dropping = d.url;
  });
  after(async () => {
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  });

  /** A front server sending each request where `decisions` say, one per decision asked (the last one repeats). */
  const front = async (decisions: HolderDecision[], wait = true) => {
    let asked = 0;
    const holder: Holder = {
      decide: () => decisions[Math.min(asked++, decisions.length - 1)],
      decideSandbox: () => ({ here: true }),
      self: 'front',
      changed: () => new Promise((r) => setTimeout(r, 20)),
    };
    const f = await listen(async (req, res) => {
      const w = await sendToHolder(req, res, holder, () => holder.decide(), wait);
      if (w === 'here') res.end('here');
      else if (w instanceof ApiError) sendProblem(res, w, req.url);
    });
    servers.push(f.server);
    return { url: f.url, asked: () => asked };
  };
  const post = (url: URL, body: string) => fetch(new URL('/run/x', url), { method: 'POST', body });

  it('waits while no server holds, then sends the request to the new holder', async () => {
    const f = await front([{ unavailable: 'none' }, { unavailable: 'none' }, { peer }]);
    const r = await post(f.url, 'first');
    assert.equal(r.status, 200);
    assert.equal(await r.text(), 'peer got POST first');
    assert.equal(f.asked(), 3);
  });

  it('sends a request refused before any byte left to the next holder, its body intact', async () => {
    const f = await front([{ peer: refusing }, { peer: refusing }, { peer }]);
    const r = await post(f.url, 'second');
    assert.equal(await r.text(), 'peer got POST second');
    assert.equal(f.asked(), 3);
  });

  it('never sends again a request a peer received: its failure is the answer', async () => {
    const f = await front([{ peer: dropping }, { peer }]);
    const before = received.length;
    const r = await post(f.url, 'third');
    assert.equal(r.status, 502);
    assert.equal(f.asked(), 1);
    assert.equal(received.length, before);
  });

  it('answers at once without waiting when told not to wait (a sandbox)', async () => {
    const f = await front([{ unavailable: 'no node' }, { peer }], false);
    const r = await post(f.url, 'fourth');
    assert.equal(r.status, 503);
    assert.equal(f.asked(), 1);
    const g = await front([{ peer: refusing }, { peer }], false);
    const refused = await post(g.url, 'fifth');
    assert.equal(refused.status, 502);
    assert.equal(g.asked(), 1);
  });

  it('settles every request it sends on: a refused one not waited for is answered, and settled', async () => {
    let settled = 0;
    const holder: Holder = {
      decide: () => ({ peer: refusing }),
      decideSandbox: () => ({ here: true }),
      self: 'front',
    };
    const f = await listen(async (req, res) => {
      await sendToHolder(req, res, holder, () => holder.decide(), false);
      settled++;
    });
    servers.push(f.server);
    const r = await post(f.url, 'sixth');
    assert.equal(r.status, 502);
    for (let i = 0; i < 50 && settled === 0; i++) await new Promise((x) => setTimeout(x, 10));
    assert.equal(settled, 1);
  });
});
