// Custom `http` trigger paths against a real SQLite store: an agent is served also at `/run/<ws>/<path>`, a second
// agent of the workspace asking for the same path is refused (409 naming the holder), a replace that moves the path
// frees the old one, and paths that would shadow the run URL's own addresses are refused (422).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { SecretBox } from '../crypto/secret-box.js';
import { ApiError } from '../errors.js';
import { agent } from '../kinds/agent.js';
import { fn } from '../kinds/function.js';
import { HostLabelIndex } from '../store/host-labels.js';
import { Resources } from '../store/resources.js';
import { SqliteStore } from '../store/sqlite.js';
import { hostLabelsOf } from './address.js';
import { matchTriggerPath } from './workload-address.js';
import { ownPathRoute, ownTriggerRoutes, triggerRoutes } from '../kinds/trigger-path.js';

async function withStore(body: (r: Resources, index: HostLabelIndex) => Promise<void>) {
  const dir = mkdtempSync(join(tmpdir(), 'berth-paths-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  const resources = new Resources(store, [agent as any, fn as any], new SecretBox(randomBytes(32)), {
    regions: ['local'],
    labelsOf: hostLabelsOf,
  });
  const index = new HostLabelIndex(store);
  await index.start();
  try {
    await body(resources, index);
  } finally {
    index.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const withPath = (r: Resources, kind: any, workspace: string, name: string, ...paths: string[]) =>
  r.replace(kind, { workspace, parents: [], actor: 't' }, name, {
    metadata: { name },
    spec: { triggers: paths.map((path, i) => ({ id: `t${i}`, type: 'http', configuration: { path } })) },
  });

const conflict = (re: RegExp) => (e: unknown) =>
  e instanceof ApiError && e.status === 409 && re.test(e.message);

test('an http trigger path serves the agent under the workspace; the app sees what follows the path', async () => {
  await withStore(async (r, index) => {
    await withPath(r, agent, 'ws', 'bot', 'my/agent');
    assert.deepEqual(matchTriggerPath('/run/ws/my/agent', index), {
      kind: 'Agent',
      workspace: 'ws',
      name: 'bot',
      rest: '/',
      path: 'my/agent',
    });
    assert.equal(matchTriggerPath('/run/ws/my/agent/chat/1?stream=true', index)?.rest, '/chat/1?stream=true');
    assert.equal(matchTriggerPath('/run/ws/my', index), undefined);
    assert.equal(matchTriggerPath('/run/other/my/agent', index), undefined, 'paths are per workspace');
    // The longest held prefix wins.
    await withPath(r, fn, 'ws', 'tools', '/my/agent/tools');
    assert.deepEqual(matchTriggerPath('/run/ws/my/agent/tools/mcp', index), {
      kind: 'Function',
      workspace: 'ws',
      name: 'tools',
      rest: '/mcp',
      path: 'my/agent/tools',
    });
  });
});

test('a second agent asking for a held path is refused with 409 naming the holder; another workspace may', async () => {
  await withStore(async (r) => {
    await withPath(r, agent, 'ws', 'bot', 'my/agent');
    await assert.rejects(
      withPath(r, agent, 'ws', 'other', '/my/agent/'),
      conflict(/the path my\/agent is already used by Agent "bot" of this workspace; choose another path/),
    );
    await assert.rejects(withPath(r, fn, 'ws', 'fn1', 'my/agent'), conflict(/already used by Agent "bot"/));
    await withPath(r, agent, 'ws2', 'other', 'my/agent');
  });
});

test('a replace that moves the path frees the old one; removing the record frees the new one', async () => {
  await withStore(async (r, index) => {
    await withPath(r, agent, 'ws', 'bot', 'my/agent');
    await withPath(r, agent, 'ws', 'bot', 'renamed');
    assert.equal(matchTriggerPath('/run/ws/my/agent', index), undefined);
    assert.equal(matchTriggerPath('/run/ws/renamed/x', index)?.name, 'bot');
    await withPath(r, agent, 'ws', 'other', 'my/agent');
    assert.equal(matchTriggerPath('/run/ws/my/agent', index)?.name, 'other');
    await assert.rejects(withPath(r, agent, 'ws', 'other', 'renamed'), conflict(/Agent "bot"/));
    const bot = await r.store.get({ kind: 'Agent', workspace: 'ws', parent: '', name: 'bot' });
    assert.ok(bot);
    await r.removeRecord(bot);
    await withPath(r, agent, 'ws', 'other', 'renamed');
    assert.equal(matchTriggerPath('/run/ws/renamed', index)?.name, 'other');
    assert.equal(matchTriggerPath('/run/ws/my/agent', index), undefined, 'other moved away from my/agent');
  });
});

test('paths under the run URL’s own addresses are refused, except the agent’s own address', async () => {
  await withStore(async (r) => {
    for (const bad of ['sandboxes/x', 'agents/someone-else', 'a/../b', 'a b', '/']) {
      await assert.rejects(
        withPath(r, agent, 'ws', 'bot', bad),
        (e: unknown) => e instanceof ApiError && e.status === 422,
        bad,
      );
    }
    await withPath(r, agent, 'ws', 'bot', 'agents/bot');
    await assert.rejects(
      withPath(r, agent, 'ws', 'bot', 'same', '/same'),
      (e: unknown) =>
        e instanceof ApiError && e.status === 422 && /duplicates the path/.test(JSON.stringify(e)),
    );
  });
});

test('an http-async trigger path is held like an http one: another object cannot take it', async () => {
  await withStore(async (r, index) => {
    await r.replace(agent, { workspace: 'ws', parents: [], actor: 't' }, 'bot', {
      metadata: { name: 'bot' },
      spec: { triggers: [{ id: 'later', type: 'http-async', configuration: { path: 'bot/async' } }] },
    });
    assert.equal(matchTriggerPath('/run/ws/bot/async', index)?.path, 'bot/async');
    await assert.rejects(withPath(r, agent, 'ws', 'other', 'bot/async'), conflict(/Agent "bot"/));
  });
});

test('authenticationType is refused where there is no own path; http-async is refused on a function', async () => {
  await withStore(async (r) => {
    const put = (kind: any, name: string, triggers: any[]) =>
      r.replace(kind, { workspace: 'ws', parents: [], actor: 't' }, name, {
        metadata: { name },
        spec: { triggers },
      });
    const refused = (re: RegExp) => (e: unknown) =>
      e instanceof ApiError && e.status === 422 && re.test(JSON.stringify(e));
    await assert.rejects(
      put(agent, 'bot', [{ type: 'http', configuration: { authenticationType: 'public' } }]),
      refused(/authenticationType.*the default address follows spec.public/),
    );
    await assert.rejects(
      put(agent, 'bot', [
        { type: 'http', configuration: { path: 'agents/bot', authenticationType: 'public' } },
      ]),
      refused(/the default address follows spec.public/),
    );
    await put(agent, 'bot', [
      { type: 'http', configuration: { path: 'open', authenticationType: 'public' } },
    ]);
    await assert.rejects(
      put(fn, 'tools', [{ type: 'http-async', configuration: { path: 'tools/async' } }]),
      refused(/http-async triggers are for agents/),
    );
  });
});

test('a path under the agent’s own address (the service’s agents/<name>/async) is accepted, unclaimed, matched by ownPathRoute', async () => {
  await withStore(async (r, index) => {
    await r.replace(agent, { workspace: 'ws', parents: [], actor: 't' }, 'bot', {
      metadata: { name: 'bot' },
      spec: { triggers: [{ id: 'later', type: 'http-async', configuration: { path: 'agents/bot/async' } }] },
    });
    assert.equal(
      matchTriggerPath('/run/ws/agents/bot/async', index),
      undefined,
      'no label: the own address serves it',
    );
    const own = ownTriggerRoutes(
      'Agent',
      'bot',
      triggerRoutes('Agent', 'bot', {
        triggers: [
          { id: 'later', type: 'http-async', configuration: { path: 'agents/bot/async' } },
          { id: 'deep', type: 'http', configuration: { path: 'agents/bot/async/deep' } },
        ],
      }),
    );
    assert.ok(own);
    assert.deepEqual(ownPathRoute(own, '/async?x=1'), {
      sub: '/async',
      route: { trigger: 'later', async: true, public: undefined },
    });
    assert.equal(ownPathRoute(own, '/async/deep/1')?.sub, '/async/deep', 'the longest wins');
    assert.equal(ownPathRoute(own, '/asyncx'), undefined);
    assert.equal(ownTriggerRoutes('Agent', 'bot', {}), undefined, 'none: nothing to look at per request');
    await assert.rejects(
      withPath(r, agent, 'ws', 'bot', 'agents/other/async'),
      (e: unknown) => e instanceof ApiError && e.status === 422,
    );
  });
});
