// `?watch=true` streams a read's objects then each change, within the caller's workspace only, redacted as reads are.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { newTenant, type Tenant } from '../test-support/tenants.js';
import { startTestServer, type TestServer } from '../test-support/server.js';

interface Event {
  type: string;
  object?: any;
}

/** Reads NDJSON events off a watch response as they come. */
function reader(res: Response) {
  const it = (res.body as unknown as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
  const dec = new TextDecoder();
  let buf = '';
  return async function next(): Promise<Event | undefined> {
    for (;;) {
      const nl = buf.indexOf('\n');
      if (nl >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        const e = JSON.parse(line) as Event;
        if (e.type !== 'PING') return e;
        continue;
      }
      const r = await it.next();
      if (r.done) return undefined;
      buf += dec.decode(r.value, { stream: true });
    }
  };
}

const policy = (name: string, total: number) => ({
  metadata: { name },
  spec: { type: 'maxToken', maxTokens: { total, granularity: 'day' } },
});

describe('watching a kind or an object', () => {
  let s: TestServer;
  let other: Tenant;
  before(async () => {
    s = await startTestServer();
    other = await newTenant(s, 'other');
  });
  after(() => s.close());

  it('a list watch sends the current objects, then each change, and nothing of another workspace', async () => {
    assert.equal((await s.api('/policies', { method: 'POST', json: policy('first', 1) })).status, 200);
    const ctl = new AbortController();
    const res = await s.api('/policies?watch=true', { signal: ctl.signal });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /application\/x-ndjson/);
    const next = reader(res);
    const first = await next();
    assert.equal(first?.type, 'ADDED');
    assert.equal(first?.object.metadata.name, 'first');
    assert.equal((await next())?.type, 'SYNCED', 'the objects there at the start, then a mark');

    // The other tenant writes a policy of the same name and one of its own: neither reaches this watch.
    const theirs = await s.api('/policies', { method: 'POST', json: policy('first', 9), key: other.key });
    assert.equal(theirs.status, 200);
    await s.api('/policies', { method: 'POST', json: policy('secret-plan', 9), key: other.key });
    assert.equal((await s.api('/policies', { method: 'POST', json: policy('second', 2) })).status, 200);
    const added = await next();
    assert.equal(added?.type, 'ADDED');
    assert.equal(added?.object.metadata.name, 'second');
    assert.equal(added?.object.metadata.workspace, 'default');

    assert.equal((await s.api('/policies/second', { method: 'PUT', json: policy('second', 3) })).status, 200);
    const changed = await next();
    assert.equal(changed?.type, 'MODIFIED');
    assert.equal(changed?.object.spec.maxTokens.total, 3);
    assert.equal((await s.api('/policies/second', { method: 'DELETE' })).status, 200);
    assert.equal((await next())?.type, 'DELETED');
    ctl.abort();
  });

  it('an object watch ends when the object is removed; another tenant cannot watch it', async () => {
    assert.equal((await s.api('/policies', { method: 'POST', json: policy('mine', 1) })).status, 200);
    const stranger = await s.api('/policies/mine?watch=true', { key: other.key });
    assert.equal(stranger.status, 404, 'the name is looked up in the caller’s own workspace');
    const res = await s.api('/policies/mine?watch=true');
    assert.equal(res.status, 200);
    const next = reader(res);
    assert.equal((await next())?.object.metadata.name, 'mine');
    assert.equal((await next())?.type, 'SYNCED');
    await s.api('/policies/mine', { method: 'DELETE' });
    assert.equal((await next())?.type, 'DELETED');
    assert.equal(await next(), undefined, 'the stream ends with the object');
  });

  it('secrets are redacted in a watch as in a read, and shown only when an admin asks', async () => {
    const conn = {
      metadata: { name: 'openai' },
      spec: { integration: 'openai', secret: { apiKey: 'sk-watch-secret' } },
    };
    assert.equal((await s.api('/integrations/connections', { method: 'POST', json: conn })).status, 200);
    const ctl = new AbortController();
    const plain = reader(await s.api('/integrations/connections?watch=true', { signal: ctl.signal }));
    const e = await plain();
    assert.equal(e?.type, 'ADDED');
    assert.notEqual(e?.object.spec.secret.apiKey, 'sk-watch-secret');
    const shown = reader(
      await s.api('/integrations/connections/openai?watch=true&show_secrets=true', { signal: ctl.signal }),
    );
    assert.equal((await shown())?.object.spec.secret.apiKey, 'sk-watch-secret');
    ctl.abort();
  });
});
