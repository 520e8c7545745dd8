// GET /v0/watch: a workspace's objects and their changes as Server-Sent Events, seen only by that workspace's
// members, with secrets redacted, and cut off once the credential is revoked.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../test-support/server.js';
import { newTenant, type Tenant } from '../test-support/tenants.js';

interface Event {
  event: string;
  id?: string;
  data: any;
}

function parse(text: string): Event[] {
  const out: Event[] = [];
  for (const block of text.split('\n\n')) {
    const e: Partial<Event> = {};
    for (const line of block.split('\n')) {
      if (line.startsWith('event: ')) e.event = line.slice(7);
      else if (line.startsWith('id: ')) e.id = line.slice(4);
      else if (line.startsWith('data: ')) e.data = JSON.parse(line.slice(6));
    }
    if (e.event) out.push(e as Event);
  }
  return out;
}

/** A followed watch: its events so far, waiting for one, and closing it. */
async function follow(s: TestServer, key: string, query = '', headers: Record<string, string> = {}) {
  const ac = new AbortController();
  const res = await s.api(`/watch?follow=true${query}`, { key, headers, signal: ac.signal });
  if (res.status !== 200) assert.fail(`${res.status} ${await res.text()}`);
  let text = '';
  let ended = false;
  const reading = (async () => {
    const dec = new TextDecoder();
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>)
        text += dec.decode(chunk, { stream: true });
    } catch {}
    ended = true;
  })();
  return {
    events: () => parse(text),
    text: () => text,
    ended: () => ended,
    async until(pred: (e: Event[]) => boolean, what: string) {
      for (let i = 0; i < 200; i++) {
        if (pred(parse(text))) return parse(text);
        if (ended) break;
        await new Promise((r) => setTimeout(r, 25));
      }
      assert.fail(`never saw ${what}; got:\n${text}`);
    },
    async close() {
      ac.abort();
      await reading;
    },
  };
}

const policy = (name: string) => ({
  metadata: { name },
  spec: { type: 'location', locations: [{ name: 'local', type: 'region' }] },
});

describe('GET /v0/watch', () => {
  let s: TestServer;
  let a: Tenant;
  let b: Tenant;
  const as = (t: Tenant) => ({ key: t.key, headers: { 'x-service-workspace': t.home } });

  before(async () => {
    s = await startTestServer();
    a = await newTenant(s, 'watch-a');
    b = await newTenant(s, 'watch-b');
    const r = await s.api('/integrations/connections', {
      method: 'POST',
      ...as(a),
      json: {
        metadata: { name: 'llm' },
        spec: { integration: 'openai', secret: { apiKey: 'sk-watch-secret-1234' } },
      },
    });
    assert.equal(r.status, 200, await r.text());
  });
  after(() => s?.close());

  it('without follow: the objects as GET shows them (secrets redacted), then SYNCED, then the end', async () => {
    const res = await s.api('/watch?kinds=integrationconnections', as(a));
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const text = await res.text();
    const events = parse(text);
    assert.deepEqual(
      events.map((e) => [e.event, e.data.object?.metadata?.name]),
      [
        ['ADDED', 'llm'],
        ['SYNCED', undefined],
      ],
    );
    assert.equal(events[0].data.kind, 'IntegrationConnection');
    assert.ok(!text.includes('sk-watch-secret-1234'), 'the secret is redacted');
  });

  it('follows every change of the workspace, in order, and none of another workspace', async () => {
    const wa = await follow(s, a.key, '&initial=false', { 'x-service-workspace': a.home });
    const wb = await follow(s, b.key, '&initial=false', { 'x-service-workspace': b.home });
    try {
      await wa.until((e) => e.some((x) => x.event === 'SYNCED'), 'SYNCED');
      await wb.until((e) => e.some((x) => x.event === 'SYNCED'), 'SYNCED');
      const post = async (t: Tenant, name: string) =>
        assert.equal(
          (await s.api('/policies', { method: 'POST', ...as(t), json: policy(name) })).status,
          200,
        );
      await post(b, 'b-private-policy');
      await post(a, 'a-policy');
      const put = await s.api('/policies/a-policy', {
        method: 'PUT',
        ...as(a),
        json: {
          ...policy('a-policy'),
          spec: { type: 'location', locations: [{ name: 'x', type: 'region' }] },
        },
      });
      assert.equal(put.status, 200);
      assert.equal((await s.api('/policies/a-policy', { method: 'DELETE', ...as(a) })).status, 200);
      const events = await wa.until((e) => e.some((x) => x.event === 'DELETED'), 'the delete');
      const mine = events.filter((e) => e.event !== 'SYNCED');
      assert.deepEqual(
        mine.map((e) => [e.event, e.data.kind, e.data.object.metadata.name]),
        [
          ['ADDED', 'Policy', 'a-policy'],
          ['MODIFIED', 'Policy', 'a-policy'],
          ['DELETED', 'Policy', 'a-policy'],
        ],
      );
      const ids = mine.map((e) => Number(e.id));
      assert.deepEqual(
        ids,
        [...ids].sort((x, y) => x - y),
        'ids grow with each write',
      );
      assert.ok(!wa.text().includes('b-private-policy'), "A's watch shows nothing of B's");
      await wb.until((e) => e.some((x) => x.data?.object?.metadata?.name === 'b-private-policy'), "B's own");
      assert.ok(!wb.text().includes('a-policy'), "B's watch shows nothing of A's");
    } finally {
      await wa.close();
      await wb.close();
    }
  });

  it("another tenant naming A's workspace is refused, and so is a kind the role cannot read or that does not exist", async () => {
    const naming = await s.api('/watch?follow=true', {
      key: b.key,
      headers: { 'x-service-workspace': a.home },
    });
    assert.ok([403, 404].includes(naming.status), `${naming.status}`);
    const unknown = await s.api('/watch?kinds=secrets', as(a));
    assert.equal(unknown.status, 422);
    assert.equal((await unknown.json()).errors[0].pointer, '/kinds');
    assert.equal((await s.api('/watch', { key: null })).status, 401);
  });

  it('a revoked key sees no change written after the revocation: its stream ends', async () => {
    const k = await s.api(`/service_accounts/${a.id}/api_keys`, { method: 'POST', ...as(a), json: {} });
    const extra = await k.json();
    assert.equal(k.status, 200);
    const w = await follow(s, extra.apiKey, '&kinds=policies&initial=false', {
      'x-service-workspace': a.home,
    });
    try {
      await w.until((e) => e.some((x) => x.event === 'SYNCED'), 'SYNCED');
      const del = await s.api(`/service_accounts/${a.id}/api_keys/${extra.id}`, {
        method: 'DELETE',
        ...as(a),
      });
      assert.equal(del.status, 200);
      assert.equal(
        (await s.api('/policies', { method: 'POST', ...as(a), json: policy('after-revoke') })).status,
        200,
      );
      const events = await w.until((e) => e.some((x) => x.event === 'ERROR'), 'the refusal');
      assert.ok(!w.text().includes('after-revoke'), 'the change after the revocation was not sent');
      assert.match(events.at(-1)?.data.detail, /no longer valid/);
      for (let i = 0; i < 100 && !w.ended(); i++) await new Promise((r) => setTimeout(r, 20));
      assert.ok(w.ended(), 'the stream ended');
    } finally {
      await w.close();
    }
  });
});

describe('GET /v0/caller', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s?.close());

  it("says who the key is and its role in the workspace it acts in (the console hides what that role can't do)", async () => {
    const sa = await (
      await s.api('/service_accounts', { method: 'POST', json: { name: 'reader', role: 'viewer' } })
    ).json();
    const key = (
      await (await s.api(`/service_accounts/${sa.client_id}/api_keys`, { method: 'POST', json: {} })).json()
    ).apiKey;
    const me = await s.api('/caller', { key });
    assert.equal(me.status, 200);
    assert.deepEqual(await me.json(), {
      subject: sa.client_id,
      subjectType: 'service_account',
      homeWorkspace: 'default',
      workspace: 'default',
      role: 'viewer',
    });
    assert.equal((await (await s.api('/caller')).json()).role, 'admin');
  });
});
