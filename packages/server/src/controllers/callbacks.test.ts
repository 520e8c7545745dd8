// Callback targets: private, loopback, link-local (cloud metadata), CGNAT and reserved addresses are refused unless
// a range is opened (BERTH_CALLBACK_ALLOW_CIDRS, or everything with the older BERTH_CALLBACK_ALLOW_PRIVATE).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { SecretBox } from '../crypto/secret-box.js';
import { Resources } from '../store/resources.js';
import { SqliteStore } from '../store/sqlite.js';
import { widget } from '../test-support/test-kinds.js';
import { ALLOW_EVERY_RANGE } from '../config.js';
import { CALLBACK_KIND, Callbacks, callbackBlockList, callbackRefusal } from './callbacks.js';

test('callback targets in private or reserved ranges are refused, public ones and opened ranges allowed', () => {
  const blocked = callbackBlockList([]);
  for (const a of [
    '127.0.0.1',
    '10.1.2.3',
    '192.168.1.1',
    '169.254.169.254',
    '172.20.0.1',
    '100.64.0.1',
    '0.0.0.0',
    '::1',
    'fd00::1',
    'fe80::1',
    '::ffff:127.0.0.1',
  ])
    assert.equal(blocked(a), true, a);
  for (const a of ['93.184.216.34', '172.32.0.1', '2606:4700::1111']) assert.equal(blocked(a), false, a);
  const opened = callbackBlockList(['127.0.0.1/32']);
  assert.equal(opened('127.0.0.1'), false);
  assert.equal(opened('127.0.0.2'), true);
  const all = callbackBlockList(ALLOW_EVERY_RANGE);
  for (const a of ['127.0.0.1', '10.0.0.8', '::1', 'fd00::1']) assert.equal(all(a), false, a);
});

test('refuses a callback URL resolving to loopback, metadata or a private range; allows it when opened', async () => {
  const strict = callbackBlockList([]);
  for (const url of [
    'http://127.0.0.1:9/cb',
    'http://169.254.169.254/latest',
    'http://10.0.0.1/x',
    'http://localhost/x',
  ])
    assert.match(String(await callbackRefusal(url, strict)), /private|loopback|link-local/, url);
  assert.match(String(await callbackRefusal('ftp://example.com/x', strict)), /http or https/);
  assert.equal(
    await callbackRefusal('http://127.0.0.1:9/cb', callbackBlockList(ALLOW_EVERY_RANGE)),
    undefined,
  );
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
  const first = new Callbacks({ resources: open(store1), allowCidrs: ['127.0.0.1/32'] });
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
    const pending = await store1.list({ kind: CALLBACK_KIND });
    assert.equal(pending.length, 1);
    assert.doesNotMatch(
      JSON.stringify(pending[0].body),
      new RegExp(secret.slice(6)),
      'the secret is sealed at rest',
    );
    await store1.close();

    up = true;
    const store2 = new SqliteStore(join(dir, 'berth.db'));
    const second = new Callbacks({ resources: open(store2), allowCidrs: ['127.0.0.1/32'] });
    await second.start();
    for (let i = 0; i < 200 && got.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
    // The receiver has answered; the record goes once the sender has read that answer.
    for (let i = 0; i < 200 && (await store2.list({ kind: CALLBACK_KIND })).length; i++)
      await new Promise((r) => setTimeout(r, 20));
    second.stop();
    assert.equal(got.length, 2);
    assert.equal(got[1].status, 200);
    assert.equal(got[1].id, 'msg_1', 'the same webhook-id');
    assert.doesNotThrow(() => new Webhook(secret).verify(got[1].body, got[1].headers));
    assert.deepEqual(await store2.list({ kind: CALLBACK_KIND }), [], 'delivered: no longer pending');
    await store2.close();
  } finally {
    receiver.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
