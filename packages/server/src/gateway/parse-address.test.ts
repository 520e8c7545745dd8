// One parse per request says which workload it is for and carries everything routing needs after it.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { claimLabelOps, HostLabelIndex } from '../store/host-labels.js';
import { SqliteStore } from '../store/sqlite.js';
import { type PreviewAddress, routeSandboxLabel } from './address.js';
import { parseAddress } from './parse-address.js';

const req = (url: string, host = '127.0.0.1:8080') => ({ url, headers: { host } }) as IncomingMessage;
const PREVIEW: PreviewAddress = { workspace: 'ws', sandbox: 'box', preview: 'web', rest: '/x', base: '/' };
const ctx = {
  inferenceHost: 'example.com',
  previewOfHost: (host: string | undefined) => (host?.startsWith('pv-known.') ? PREVIEW : undefined),
  labels: { resolve: () => undefined },
};

test('a sandbox path is parsed into workspace, name and the rest, still encoded', () => {
  assert.deepEqual(parseAddress(req('/run/ws/sandboxes/box/filesystem/%2Ftmp?x=1'), ctx), {
    kind: 'sandbox',
    workspace: 'ws',
    name: 'box',
    rest: '/filesystem/%2Ftmp?x=1',
  });
});

test('a sandbox host owns every path on it, /v0 included', () => {
  assert.deepEqual(parseAddress(req('/v0/sandboxes', 'sbx-my-box-team.local.example.com'), ctx), {
    kind: 'sandbox-host',
    label: 'sbx-my-box-team',
    rest: '/v0/sandboxes',
  });
});

test('previews are found by their own host first, then by path', () => {
  assert.deepEqual(parseAddress(req('/run/ws/sandboxes/box', 'pv-known.local.example.com'), ctx), {
    kind: 'preview',
    preview: PREVIEW,
  });
  const byPath = parseAddress(req('/run/ws/previews/box/web/app?q=1'), ctx);
  assert.equal(byPath?.kind, 'preview');
  assert.deepEqual(byPath?.kind === 'preview' && byPath.preview, {
    workspace: 'ws',
    sandbox: 'box',
    preview: 'web',
    rest: '/app?q=1',
    base: '/run/ws/previews/box/web/',
  });
});

test("a preview's custom domain is found by an exact label lookup, and carries the domain to be checked", () => {
  const labels = {
    resolve: (l: string) =>
      l === 'url:shop.example.org'
        ? { kind: 'Preview', workspace: 'ws', parent: 'box', name: 'web' }
        : undefined,
  };
  assert.deepEqual(parseAddress(req('/cart?x=1', 'Shop.Example.org:443'), { ...ctx, labels }), {
    kind: 'preview',
    preview: {
      workspace: 'ws',
      sandbox: 'box',
      preview: 'web',
      rest: '/cart?x=1',
      base: '/',
      domain: 'shop.example.org',
    },
  });
  assert.equal(parseAddress(req('/', 'other.example.org'), { ...ctx, labels }), undefined);
});

test('anything else is not the data plane: the API answers it', () => {
  for (const url of ['/v0/sandboxes', '/run/ws/models/m/v1/chat', '/run/ws/sandboxes/', '/runner', '/'])
    assert.equal(parseAddress(req(url), ctx), undefined, url);
  assert.equal(
    parseAddress(req('/', 'sbx-box-ws.local.example.com'), { ...ctx, inferenceHost: undefined }),
    undefined,
  );
});

test('a host label is resolved by an exact lookup in the address table, never by a split', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-host-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  const labels = new HostLabelIndex(store);
  try {
    await labels.start();
    const key = { kind: 'Sandbox', workspace: 'team', parent: '', name: 'my-box' };
    await store.write([
      { op: 'create', key, body: { metadata: { name: 'my-box' }, spec: {}, status: 'DEPLOYING' } },
      ...(await claimLabelOps(store, ['sbx-my-box-team'], key)),
    ]);
    assert.deepEqual(routeSandboxLabel(labels, 'sbx-my-box-team'), {
      workspace: 'team',
      name: 'my-box',
    });
    // A label nobody holds names nothing, however it could be split.
    assert.deepEqual(routeSandboxLabel(labels, 'sbx-other-x-y'), {
      workspace: 'sbx-other-x-y',
      name: 'sbx-other-x-y',
    });
  } finally {
    labels.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
