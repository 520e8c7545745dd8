import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import pino from 'pino';
import type { Authenticator } from '../auth/access.js';
import { errorPrefixOf } from '../errors.js';
import { StoreError } from '../store/store.js';
import { createApp } from './app.js';

test("a store race that reaches the error handler is a 409 (with the kind's own code) or 404 problem, never a 500", async () => {
  // Routes outside /v0 never ask the authenticator.
  const app = createApp({
    bodyLimit: 1024,
    logger: pino({ level: 'silent' }),
    authenticator: {} as Authenticator,
  });
  const key = { kind: 'Sandbox', workspace: 'ws', parent: '', name: 'box' };
  app.get('/race/:reason', async (req) => {
    throw new StoreError((req.params as { reason: 'conflict' | 'exists' | 'not_found' }).reason, key);
  });
  try {
    for (const [reason, status, code] of [
      ['conflict', 409, 'CONFLICT'],
      ['exists', 409, 'SANDBOX_ALREADY_EXISTS'],
      ['not_found', 404, 'NOT_FOUND'],
    ] as const) {
      const res = await app.inject({ method: 'GET', url: `/race/${reason}` });
      assert.equal(res.statusCode, status, res.body);
      assert.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8');
      assert.equal(res.json().error, code);
    }
  } finally {
    await app.close();
  }
});

test('the error prefix of a kind is its name in SCREAMING_SNAKE_CASE', () => {
  for (const [kind, prefix] of [
    ['Sandbox', 'SANDBOX'],
    ['EgressGateway', 'EGRESS_GATEWAY'],
    ['IntegrationConnection', 'INTEGRATION_CONNECTION'],
    ['Vpc', 'VPC'],
  ])
    assert.equal(errorPrefixOf(kind), prefix);
});

test('/healthz answers without a credential and reports the version of the server package', async () => {
  const app = createApp({
    bodyLimit: 1024,
    logger: pino({ level: 'silent' }),
    authenticator: {} as Authenticator,
  });
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    const res = await app.inject({ method: 'GET', url: '/healthz' });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { status: 'ok', version: pkg.version });
  } finally {
    await app.close();
  }
});

test('a URL the router cannot decode, or a path parameter past its limit, is answered as a problem (fuzzer finding)', async () => {
  const app = createApp({
    bodyLimit: 1024,
    logger: pino({ level: 'silent' }),
    authenticator: {} as Authenticator,
  });
  app.get('/things/:name', async () => ({ ok: true }));
  try {
    for (const [url, status] of [
      ['/things/%zz', 400],
      ['/things/%ED%A0%80', 400],
      ['/things/%', 400],
      [`/things/${'x'.repeat(600)}`, 414],
    ] as const) {
      const res = await app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, status, res.body);
      assert.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8', res.body);
      const p = res.json();
      assert.equal(p.code, status);
      assert.equal(p.error, 'MALFORMED_REQUEST');
    }
  } finally {
    await app.close();
  }
});
