import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sandboxId } from '../runtime/sandbox-id.js';
import {
  hostLabelsOf,
  matchSandboxHost,
  matchSandboxPath,
  pathLabel,
  previewLabel,
  previewUrl,
  sandboxUrl,
} from './address.js';
import { PreviewHosts } from './previews.js';

test('the path form yields workspace, name and the rest of the URL, still encoded', () => {
  assert.deepEqual(matchSandboxPath('/run/default/sandboxes/box/filesystem/%2Ftmp%2Fa?x=1'), {
    workspace: 'default',
    name: 'box',
    rest: '/filesystem/%2Ftmp%2Fa?x=1',
  });
  assert.deepEqual(matchSandboxPath('/run/ws/sandboxes/box'), { workspace: 'ws', name: 'box', rest: '/' });
  assert.deepEqual(matchSandboxPath('/run/ws/sandboxes/box?q'), {
    workspace: 'ws',
    name: 'box',
    rest: '/?q',
  });
  for (const other of [
    '/run/ws/agents/a',
    '/run/ws/sandboxes/',
    '/v0/sandboxes/box',
    '/run/sandboxes/x',
    '/runner',
  ])
    assert.equal(matchSandboxPath(other), undefined, other);
});

test('the host form is recognised only under the inference host, port or not', () => {
  assert.deepEqual(matchSandboxHost('sbx-my-box-team-a.local.example.com:8080', 'example.com'), {
    label: 'sbx-my-box-team-a',
    region: 'local',
  });
  assert.deepEqual(matchSandboxHost('SBX-box-ws.eu.Example.com', 'example.com'), {
    label: 'sbx-box-ws',
    region: 'eu',
  });
  for (const other of [
    'sbx-box-ws.example.com',
    'sbx-box-ws.a.b.example.com',
    'box-ws.local.example.com',
    'sbx-box-ws.local.example.org',
  ])
    assert.equal(matchSandboxHost(other, 'example.com'), undefined, other);
  assert.equal(matchSandboxHost('sbx-box-ws.local.example.com', undefined), undefined);
});

test('metadata.url takes the host form when an inference host is configured', () => {
  const base = () => 'http://127.0.0.1:8080';
  assert.equal(
    sandboxUrl({ baseUrl: base }, 'ws', 'box', 'local'),
    'http://127.0.0.1:8080/run/ws/sandboxes/box',
  );
  assert.equal(
    sandboxUrl({ baseUrl: base, inferenceHost: 'sbx.dev' }, 'ws', 'box', 'eu'),
    'http://sbx-box-ws.eu.sbx.dev:8080',
  );
  assert.equal(
    sandboxUrl({ baseUrl: () => 'https://berth.example.com', inferenceHost: 'sbx.dev' }, 'ws', 'box', 'eu'),
    'https://sbx-box-ws.eu.sbx.dev',
  );
});

test('runtime ids are <workspace>.<name>, hashed when too long, and stable', () => {
  assert.equal(sandboxId('default', 'box'), 'default.box');
  const long = sandboxId('w'.repeat(40), 'n'.repeat(40));
  assert.match(long, /^h-[0-9a-f]{40}$/);
  assert.equal(long, sandboxId('w'.repeat(40), 'n'.repeat(40)));
  assert.notEqual(long, sandboxId('w'.repeat(40), 'm'.repeat(40)));
});

test("a preview's prefixUrl is its address in both forms, held as labels of the table", () => {
  const body = { metadata: { name: 'web', resourceName: 'box' }, spec: { prefixUrl: 'shop' } };
  const key = { kind: 'Preview', workspace: 'team', parent: 'box', name: 'web' };
  const base = () => 'http://127.0.0.1:8080';
  assert.equal(previewUrl({ baseUrl: base }, 'team', body, 'local'), 'http://127.0.0.1:8080/run/team/shop');
  assert.equal(
    previewUrl({ baseUrl: base, inferenceHost: 'example.com' }, 'team', body, 'local'),
    'http://pv-shop-team.local.example.com:8080',
  );
  const labels = hostLabelsOf(key, body);
  assert.deepEqual(labels, [previewLabel('team', 'box', 'web'), 'pv-shop-team', pathLabel('team', 'shop')]);
  const table = new Map(labels.map((l) => [l, key]));
  const hosts = new PreviewHosts({ resolve: (l: string) => table.get(l) } as never, 'example.com');
  assert.deepEqual(hosts.match('pv-shop-team.local.example.com:8080', '/a?b'), {
    workspace: 'team',
    sandbox: 'box',
    preview: 'web',
    rest: '/a?b',
    base: '/',
  });
});
