// The outbound client on the wire: it resolves a name itself and dials only vetted addresses (the next one when one
// refuses), keeps the name for TLS (the certificate is checked against it, not the address), and judges every
// redirect hop; a closed address is never connected to.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { Outbound, OutboundRefused } from './outbound.js';

const names: Record<string, string[]> = {
  'svc.test': ['127.0.0.1'],
  'ok.test': ['127.0.0.1'],
  'second.test': ['127.0.0.3', '127.0.0.1'], // nothing listens on the first
  'mixed.test': ['93.184.215.14', '127.0.0.1'],
};
const lookup = async (h: string) => {
  if (names[h]) return names[h];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${h}`), { code: 'ENOTFOUND' });
};
const opened = new Outbound({ allowCidrs: ['127.0.0.0/8'], lookup });
const closed = new Outbound({ allowCidrs: [], lookup });
const refusal = (e: any) => (e?.cause ?? e) instanceof OutboundRefused;

describe('outbound client', () => {
  let dir: string;
  let http: Server;
  let https: Server;
  let hits = 0;
  let port: number;
  let tlsPort: number;
  let ca: Buffer;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-outbound-'));
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1']
        .concat(['-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')])
        .concat(['-subj', '/CN=ok.test', '-addext', 'subjectAltName=DNS:ok.test']),
      { stdio: 'ignore' },
    );
    ca = readFileSync(join(dir, 'cert.pem'));
    http = createServer((req, res) => {
      hits++;
      if (req.url === '/redirect')
        return void res.writeHead(302, { location: `http://[::1]:${port}/` }).end();
      res.end('ok');
    });
    await new Promise<void>((r) => http.listen(0, '::', r));
    port = (http.address() as AddressInfo).port;
    https = createHttpsServer({ key: readFileSync(join(dir, 'key.pem')), cert: ca }, (_q, r) =>
      r.end('secure'),
    );
    await new Promise<void>((r) => https.listen(0, '127.0.0.1', r));
    tlsPort = (https.address() as AddressInfo).port;
  });
  after(async () => {
    http.close();
    https.close();
    await opened.close();
    await closed.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('dials a name at the address it vetted, and refuses it, unheard, when that address is closed', async () => {
    const agent = opened.agent();
    const ok = await request(`http://svc.test:${port}/`, { dispatcher: agent });
    assert.equal(await ok.body.text(), 'ok');
    const before = hits;
    for (const url of [
      `http://svc.test:${port}/`,
      `http://127.0.0.1:${port}/`,
      `http://[::ffff:7f00:1]:${port}/`,
    ])
      await assert.rejects(request(url, { dispatcher: closed.agent() }), refusal, url);
    // One closed answer among open ones: the name is trusted with none.
    await assert.rejects(request(`http://mixed.test:${port}/`, { dispatcher: closed.agent() }), refusal);
    assert.equal(hits, before, 'nothing reached the listener');
    await agent.close();
  });

  it('tries the next vetted address when one does not answer', async () => {
    const res = await request(`http://second.test:${port}/`, { dispatcher: opened.agent() });
    assert.equal(await res.body.text(), 'ok');
  });

  it('checks the certificate against the name asked for, not the address dialled', async () => {
    const agent = opened.agent({ connect: { ca } });
    const res = await request(`https://ok.test:${tlsPort}/`, { dispatcher: agent });
    assert.equal(await res.body.text(), 'secure');
    await assert.rejects(
      request(`https://svc.test:${tlsPort}/`, { dispatcher: opened.agent({ connect: { ca } }) }),
      /altnames|ERR_TLS_CERT_ALTNAME_INVALID|does not match/i,
    );
  });

  it('judges each redirect hop: one to a closed address is not followed', async () => {
    const onlyV4 = new Outbound({ allowCidrs: ['127.0.0.1/32'], lookup });
    const before = hits;
    await assert.rejects(onlyV4.fetch(`http://127.0.0.1:${port}/redirect`), refusal);
    assert.equal(hits, before + 1, 'the first hop only');
    const manual = await onlyV4.fetch(`http://127.0.0.1:${port}/redirect`, { redirect: 'manual' });
    assert.equal(manual.status, 302);
    await onlyV4.close();
  });
});
