// The host forms of agents and functions against a real SQLite store: `agt-<agent>-<ws>` and `mcp-<fn>-<ws>` are
// claimed with the object, a second tenant whose names give the same label is refused instead of taking it over,
// and a Host routes to exactly the object that holds its label.
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
import { hostLabelsOf, runUrlOf, workloadLabel } from './address.js';
import { matchWorkloadHost } from './workload-address.js';

const HOST = 'run.example.test';

async function withTable(fn2: (r: Resources, index: HostLabelIndex) => Promise<void>) {
  const dir = mkdtempSync(join(tmpdir(), 'berth-wl-labels-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  const resources = new Resources(store, [agent as any, fn as any], new SecretBox(randomBytes(32)), {
    regions: ['local'],
    labelsOf: hostLabelsOf,
  });
  const index = new HostLabelIndex(store);
  await index.start();
  try {
    await fn2(resources, index);
  } finally {
    index.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const put = (r: Resources, kind: any, workspace: string, name: string) =>
  r.replace(kind, { workspace, parents: [], actor: 't' }, name, { metadata: { name }, spec: {} });

test('agt-a-b-c: the agent that claimed it keeps it; the other tenant whose names give the same label gets 409', async () => {
  await withTable(async (r, index) => {
    await put(r, agent, 'c', 'a-b');
    assert.equal(workloadLabel('Agent', 'b-c', 'a'), 'agt-a-b-c');
    await assert.rejects(
      put(r, agent, 'b-c', 'a'),
      (e: unknown) =>
        e instanceof ApiError &&
        e.status === 409 &&
        /already used by an object of another workspace/.test(e.message),
    );
    const routed = matchWorkloadHost('agt-a-b-c.local.run.example.test:8080', '/chat?x=1', HOST, index);
    assert.deepEqual(routed, { kind: 'Agent', workspace: 'c', name: 'a-b', rest: '/chat?x=1' });
  });
});

test('mcp-<fn>-<ws> routes to the function; an agent of the same name holds its own agt- label', async () => {
  await withTable(async (r, index) => {
    await put(r, fn, 'ws', 'tools');
    await put(r, agent, 'ws', 'tools');
    assert.deepEqual(matchWorkloadHost(`mcp-tools-ws.local.${HOST}`, '/mcp', HOST, index), {
      kind: 'Function',
      workspace: 'ws',
      name: 'tools',
      rest: '/mcp',
    });
    assert.equal(matchWorkloadHost(`agt-tools-ws.local.${HOST}`, '/', HOST, index)?.kind, 'Agent');
    // A label nobody holds names nothing that exists (the caller is still asked for a credential first).
    assert.deepEqual(matchWorkloadHost(`agt-nope-ws.local.${HOST}`, '/', HOST, index), {
      kind: 'Agent',
      workspace: 'agt-nope-ws',
      name: 'agt-nope-ws',
      rest: '/',
    });
    // Without an inference host, or for another host, nothing matches.
    assert.equal(matchWorkloadHost(`agt-tools-ws.local.${HOST}`, '/', undefined, index), undefined);
    assert.equal(matchWorkloadHost('agt-tools-ws.local.elsewhere.test', '/', HOST, index), undefined);
  });
});

test('metadata.url of an agent and a function is the host form when an inference host is set', () => {
  const urlOf = runUrlOf({
    baseUrl: () => 'http://127.0.0.1:8080',
    inferenceHost: HOST,
    defaultRegion: 'local',
  });
  const body = (name: string) => ({ metadata: { name }, spec: { region: 'local' } });
  assert.equal(urlOf({ kind: 'Agent' }, 'ws', body('bot')), `http://agt-bot-ws.local.${HOST}:8080`);
  assert.equal(urlOf({ kind: 'Function' }, 'ws', body('tools')), `http://mcp-tools-ws.local.${HOST}:8080`);
  const pathForm = runUrlOf({ baseUrl: () => 'http://127.0.0.1:8080', defaultRegion: 'local' });
  assert.equal(pathForm({ kind: 'Agent' }, 'ws', body('bot')), 'http://127.0.0.1:8080/run/ws/agents/bot');
});
