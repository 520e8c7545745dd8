// Bearer capabilities carried in a URL (a preview token's value, an upload URL's token) never reach the server's log
// lines or a problem answer's `instance`, even at the debug level, where every request's URL is logged.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { redactUrl } from './log-redact.js';
import { startTestServer } from './test-support/server.js';

test('a URL loses its preview token values and upload token, and keeps the rest', () => {
  assert.equal(
    redactUrl('/v0/sandboxes/s/previews/p/tokens/bpt_abcDEF-_1?x=1&bl_preview_token=bpt_zz&y=2'),
    '/v0/sandboxes/s/previews/p/tokens/bpt_[redacted]?x=1&bl_preview_token=[redacted]&y=2',
  );
  assert.equal(redactUrl('/uploads/eyJ3cyI6.c2ln?x=1'), '/uploads/[redacted]?x=1');
  assert.equal(
    redactUrl('/v0/sandboxes/s/previews/p/tokens/first'),
    '/v0/sandboxes/s/previews/p/tokens/first',
  );
});

test('a debug log and a problem answer show no token value sent in a request URL', async () => {
  const s = await startTestServer({ BERTH_LOG_LEVEL: 'debug', BERTH_WARM_POOL: '0' });
  try {
    const value = 'bpt_SecretValueOfTheTest123';
    const query = 'QueryTokenOfTheTest456';
    const r = await s.api(`/sandboxes/none/previews/none/tokens/${value}?bl_preview_token=${query}`, {
      method: 'DELETE',
    });
    assert.equal(r.status, 404);
    const problem = await r.json();
    assert.doesNotMatch(JSON.stringify(problem), /SecretValueOfTheTest/);
    assert.match(problem.instance, /tokens\/bpt_\[redacted\]$/);
    const up = await fetch(`${s.url}/uploads/UploadTokenOfTheTest789.sig`, { method: 'PUT', body: 'x' });
    await up.arrayBuffer();
    const logs = s.logs();
    assert.match(logs, /bpt_\[redacted\]/, 'the request was logged');
    for (const secret of ['SecretValueOfTheTest', 'QueryTokenOfTheTest', 'UploadTokenOfTheTest'])
      assert.doesNotMatch(logs, new RegExp(secret));
  } finally {
    await s.close();
  }
});
