// Callback targets: private, loopback, link-local (cloud metadata), CGNAT, reserved and the host's own addresses are
// refused unless a range is opened (BERTH_OUTBOUND_ALLOW_CIDRS, or its older names BERTH_CALLBACK_ALLOW_CIDRS and
// BERTH_CALLBACK_ALLOW_PRIVATE), judged before anything is sent and again on the address a callback connects to.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { SecretBox } from '../../crypto/secret-box.js';
import { Outbound } from '../../outbound/index.js';
import { Resources } from '../../store/resources.js';
import { SqliteStore } from '../../store/sqlite.js';
import { widget } from '../../test-support/test-kinds.js';
import { ALLOW_EVERY_RANGE } from '../../config.js';
import { CALLBACK_KIND, Callbacks, type CallbackState } from './callbacks.js';
import { EVERY_WORKSPACE } from '../../store/store.js';

const HOST = '192.0.2.2'; // this host's LAN address, as the injected interface list says
const interfaces = () => ['127.0.0.1', '::1', HOST];
const outbound = (allowCidrs: string[] = []) => new Outbound({ allowCidrs, interfaces });
const store = () => new SqliteStore(':memory:');
const resources = () =>
  new Resources(store(), [widget], new SecretBox(randomBytes(32)), { regions: ['local'] });

test('refuses a callback URL on loopback, metadata, a private range or the host; allows it when opened', async () => {
  const strict = new Callbacks({ resources: resources(), outbound: outbound() });
  for (const url of [
    'http://127.0.0.1:9/cb',
    'http://169.254.169.254/latest',
    'http://10.0.0.1/x',
    'http://localhost/x',
    'http://[::ffff:127.0.0.1]:9/cb',
    'http://2130706433:9/cb',
    'http://192.0.2.7/cb',
    `http://${HOST}:9/cb`,
  ])
    assert.match(String(await strict.refusal(url)), /loopback|in \d|never opened/, url);
  assert.match(String(await strict.refusal('ftp://example.com/x')), /http or https/);
  const opened = new Callbacks({ resources: resources(), outbound: outbound(['127.0.0.1/32']) });
  assert.equal(await opened.refusal('http://127.0.0.1:9/cb'), undefined);
  assert.match(String(await opened.refusal('http://127.0.0.2:9/cb')), /loopback/);
  const every = new Callbacks({ resources: resources(), outbound: outbound(ALLOW_EVERY_RANGE) });
  assert.equal(await every.refusal('http://10.0.0.8/cb'), undefined);
  assert.match(
    String(await every.refusal('http://127.0.0.1:9/cb')),
    /loopback/,
    'every range is not loopback',
  );
  assert.match(String(await every.refusal(`http://${HOST}/cb`)), /never opened/, 'nor the host');
});

test('a callback stored with an IP-literal target is never connected to: refused at connect, and dropped', async () => {
  let hits = 0;
  const receiver = createServer((_q, r) => {
    hits++;
    r.end();
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const port = (receiver.address() as AddressInfo).port;
  const res = resources();
  const callbacks = new Callbacks({ resources: res, outbound: outbound() });
  try {
    for (const [i, host] of ['127.0.0.1', '[::ffff:127.0.0.1]', '2130706433', '0x7f.1', '127.1'].entries()) {
      const states: CallbackState[] = [];
      // As a record written before any check existed: send() itself does not judge the URL.
      await callbacks.send(
        {
          workspace: 'ws',
          owner: 'Job/j',
          id: `msg_${i}`,
          url: `http://${host}:${port}/hook`,
          secret: 'whsec_x',
          body: '{}',
          retry: 3,
        },
        (s) => states.push(s),
      );
      for (let n = 0; n < 100 && !states.length; n++) await new Promise((r) => setTimeout(r, 20));
      assert.equal(states.length, 1, host);
      assert.equal(states[0].delivered, false, host);
      assert.match(String(states[0].error), /loopback/, host);
      // Refused is final: no retry is scheduled, the record goes.
      for (
        let n = 0;
        n < 100 && (await res.store.list({ workspace: EVERY_WORKSPACE, kind: CALLBACK_KIND })).length;
        n++
      )
        await new Promise((r) => setTimeout(r, 20));
      assert.deepEqual(await res.store.list({ workspace: EVERY_WORKSPACE, kind: CALLBACK_KIND }), [], host);
    }
    assert.equal(hits, 0, 'the receiver on loopback heard nothing');
  } finally {
    callbacks.stop();
    receiver.close();
  }
});

test('a callback is stored before it is sent: a new instance on the same store delivers what the old one left, signed, and then forgets it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-callbacks-'));
  const box = new SecretBox(randomBytes(32));
  const open = (store: SqliteStore) => new Resources(store, [widget], box, { regions: ['local'] });
  const got: { status: number; id?: string; body: string; headers: Record<string, string> }[] = [];
  let up = false;
  const receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      const status = up ? 200 : 503;
      got.push({ status, id: req.headers['webhook-id'] as string, body, headers: req.headers as any });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  const secret = `whsec_${randomBytes(24).toString('base64')}`;
  const store1 = new SqliteStore(join(dir, 'berth.db'));
  const first = new Callbacks({ resources: open(store1), outbound: outbound(['127.0.0.1/32']) });
  try {
    await first.send({
      workspace: 'ws',
      owner: 'Job/j',
      id: 'msg_1',
      url,
      secret,
      body: '{"n":1}',
      retry: 5,
    });
    for (let i = 0; i < 100 && !got.length; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(got.length, 1, 'tried at once');
    first.stop(); // the process "dies" with the retry pending
    const pending = await store1.list({ workspace: EVERY_WORKSPACE, kind: CALLBACK_KIND });
    assert.equal(pending.length, 1);
    // Compared as text: the random secret may hold characters a regular expression would read as syntax.
    assert.ok(!JSON.stringify(pending[0].body).includes(secret.slice(6)), 'the secret is sealed at rest');
    await store1.close();

    up = true;
    const store2 = new SqliteStore(join(dir, 'berth.db'));
    const second = new Callbacks({ resources: open(store2), outbound: outbound(['127.0.0.1/32']) });
    await second.start();
    for (let i = 0; i < 200 && got.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
    // The receiver has answered; the record goes once the sender has read that answer.
    for (
      let i = 0;
      i < 200 && (await store2.list({ workspace: EVERY_WORKSPACE, kind: CALLBACK_KIND })).length;
      i++
    )
      await new Promise((r) => setTimeout(r, 20));
    second.stop();
    assert.equal(got.length, 2);
    assert.equal(got[1].status, 200);
    assert.equal(got[1].id, 'msg_1', 'the same webhook-id');
    assert.doesNotThrow(() => new Webhook(secret).verify(got[1].body, got[1].headers));
    assert.deepEqual(
      await store2.list({ workspace: EVERY_WORKSPACE, kind: CALLBACK_KIND }),
      [],
      'delivered: no longer pending',
    );
    await store2.close();
  } finally {
    receiver.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
