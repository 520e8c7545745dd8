import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Value } from '../kinds/typebox.js';
import { startTestServer, type TestServer } from '../test-support/server.js';
import { DEFAULT_TEMPLATES_DIR, templateSha } from './catalog.js';
import { Template } from './schema.js';

describe('template catalog', () => {
  let s: TestServer;
  let viewerKey: string;

  before(async () => {
    s = await startTestServer();
    const sa = await (
      await s.api('/service_accounts', { method: 'POST', json: { name: 'reader', role: 'viewer' } })
    ).json();
    const key = await (
      await s.api(`/service_accounts/${sa.client_id}/api_keys`, { method: 'POST', json: {} })
    ).json();
    viewerKey = key.apiKey;
  });
  after(() => s.close());

  it('lists the repository templates as a bare array of §2.15 entries', async () => {
    const res = await s.api('/templates');
    assert.equal(res.status, 200);
    const list = await res.json();
    assert.ok(Array.isArray(list));
    assert.deepEqual(
      list.map((t: any) => t.name),
      ['agent-python', 'agent-typescript', 'job-typescript', 'mcp-mail', 'mcp-typescript'],
    );
    for (const t of list) {
      assert.ok(Value.Check(Template, t), `${t.name}: ${JSON.stringify([...Value.Errors(Template, t)][0])}`);
      assert.equal(t.defaultBranch, 'main');
      assert.deepEqual([t.downloadCount, t.forksCount, t.starCount], [0, 0, 0]);
      assert.match(t.icon, /^data:image\/svg\+xml;base64,/);
      assert.match(t.iconDark, /^data:image\/svg\+xml;base64,/);
    }
  });

  it('gives each template the sha256 of its files', async () => {
    const t = await (await s.api('/templates/agent-python')).json();
    assert.match(t.sha, /^[0-9a-f]{64}$/);
    assert.equal(t.sha, templateSha(join(DEFAULT_TEMPLATES_DIR, 'agent-python')));
    const other = await (await s.api('/templates/agent-typescript')).json();
    assert.notEqual(other.sha, t.sha);
  });

  it('reads one template by name, with its variables', async () => {
    const res = await s.api('/templates/agent-typescript');
    assert.equal(res.status, 200);
    const t = await res.json();
    assert.equal(t.name, 'agent-typescript');
    assert.ok(t.topics.includes('agent'));
    assert.deepEqual(t.variables, [
      {
        name: 'REPLY_STYLE',
        description: 'upper (default) answers in capitals, echo answers the inputs unchanged',
        path: 'spec.runtime.envs',
        integration: '',
        secret: false,
      },
    ]);
  });

  it('answers an unknown template with a 404 problem', async () => {
    const res = await s.api('/templates/no-such-template');
    assert.equal(res.status, 404);
    assert.match(res.headers.get('content-type') ?? '', /application\/problem\+json/);
    const p = await res.json();
    assert.equal(p.error, 'NOT_FOUND');
    assert.equal(p.code, 404);
    assert.match(p.detail, /no-such-template/);
  });

  it('is readable by a viewer and not without a credential', async () => {
    assert.equal((await s.api('/templates', { key: viewerKey })).status, 200);
    assert.equal((await s.api('/templates/mcp-typescript', { key: viewerKey })).status, 200);
    assert.equal((await s.api('/templates', { key: null })).status, 401);
  });
});
