import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../test-support/server.js';

describe('volume template versions', () => {
  let s: TestServer;
  const versions = '/volume_templates/deps/versions';

  before(async () => {
    s = await startTestServer();
    const r = await s.api('/volume_templates', {
      method: 'POST',
      json: { metadata: { name: 'deps' }, spec: {} },
    });
    assert.equal(r.status, 200);
  });
  after(() => s.close());

  it('a new template has no versions and a zero count', async () => {
    const t = await (await s.api('/volume_templates/deps')).json();
    assert.deepEqual(t.state, { versionCount: 0 });
    assert.deepEqual(t.versions, []);
    assert.equal(t.spec.defaultSize, 1024);
    assert.deepEqual(await (await s.api(versions)).json(), []);
  });

  it('PUT records a version and updates the template state', async () => {
    const r = await s.api(`${versions}/v1`, { method: 'PUT', json: { contentSize: 2048, bucket: 'local' } });
    const v = await r.json();
    assert.equal(r.status, 200, JSON.stringify(v));
    assert.equal(v.name, 'v1');
    assert.equal(v.templateName, 'deps');
    assert.equal(v.workspace, 'default');
    assert.equal(v.region, 'local');
    assert.equal(v.contentSize, 2048);
    assert.match(v.versionId, /^[0-9a-f-]{36}$/);
    await s.api(`${versions}/v2`, { method: 'PUT', json: {} });

    const t = await (await s.api('/volume_templates/deps')).json();
    assert.equal(t.state.latestVersion, 'v2');
    assert.equal(t.state.versionCount, 2);
    assert.ok(!Number.isNaN(Date.parse(t.state.lastVersionUploadedAt)));
    assert.deepEqual(
      (await (await s.api(versions)).json()).map((x: any) => x.name),
      ['v1', 'v2'],
    );
  });

  it('versions written at the same time are all kept: none is lost to another and none answers 409', async () => {
    await s.api('/volume_templates', { method: 'POST', json: { metadata: { name: 'busy' }, spec: {} } });
    const names = Array.from({ length: 30 }, (_, i) => `c${i}`);
    const answers = await Promise.all(
      names.map((n) => s.api(`/volume_templates/busy/versions/${n}`, { method: 'PUT', json: {} })),
    );
    assert.deepEqual(
      answers.map((r) => r.status),
      names.map(() => 200),
    );
    const kept = (await (await s.api('/volume_templates/busy/versions')).json()).map((x: any) => x.name);
    assert.deepEqual([...kept].sort(), [...names].sort());
    assert.equal((await (await s.api('/volume_templates/busy')).json()).state.versionCount, 30);
  });

  it('a replace of the template keeps its versions and state', async () => {
    const r = await s.api('/volume_templates/deps', {
      method: 'PUT',
      json: {
        metadata: { name: 'deps' },
        spec: { description: 'python wheels' },
        state: { versionCount: 99 },
      },
    });
    const t = await r.json();
    assert.equal(r.status, 200);
    assert.equal(t.state.versionCount, 2);
    assert.equal(t.versions.length, 2);
  });

  it('rejects a bad body (422), an unknown region (422) and an unknown template (404)', async () => {
    const bad = await s.api(`${versions}/v3`, { method: 'PUT', json: { contentSize: -1 } });
    assert.equal(bad.status, 422);
    assert.equal((await bad.json()).errors[0].pointer, '/contentSize');
    const far = await s.api(`${versions}/v3`, { method: 'PUT', json: { region: 'mars-1' } });
    assert.equal(far.status, 422);
    assert.equal((await far.json()).errors[0].pointer, '/region');
    assert.equal(
      (await s.api('/volume_templates/nope/versions/v1', { method: 'PUT', json: {} })).status,
      404,
    );
    assert.equal((await s.api('/volume_templates/nope/versions')).status, 404);
  });

  it('DELETE answers {message, template} with the state updated', async () => {
    const r = await s.api(`${versions}/v2`, { method: 'DELETE' });
    const body = await r.json();
    assert.equal(r.status, 200, JSON.stringify(body));
    assert.deepEqual(Object.keys(body).sort(), ['message', 'template']);
    assert.match(body.message, /v2/);
    assert.equal(body.template.metadata.name, 'deps');
    assert.equal(body.template.state.latestVersion, 'v1');
    assert.equal(body.template.state.versionCount, 1);
    assert.deepEqual(
      body.template.versions.map((v: any) => v.name),
      ['v1'],
    );
    assert.equal((await s.api(`${versions}/v2`, { method: 'DELETE' })).status, 404);
  });

  it('a viewer may list versions but not record one (403); no credential is 401', async () => {
    const sa = await (
      await s.api('/service_accounts', { method: 'POST', json: { name: 'reader', role: 'viewer' } })
    ).json();
    const key = (
      await (await s.api(`/service_accounts/${sa.client_id}/api_keys`, { method: 'POST', json: {} })).json()
    ).apiKey;
    assert.equal((await s.api(versions, { key })).status, 200);
    assert.equal((await s.api(`${versions}/v9`, { method: 'PUT', json: {}, key })).status, 403);
    assert.equal((await s.api(`${versions}/v1`, { method: 'DELETE', key })).status, 403);
    assert.equal((await s.api(`${versions}/v9`, { method: 'PUT', json: {}, key: null })).status, 401);
  });
});
