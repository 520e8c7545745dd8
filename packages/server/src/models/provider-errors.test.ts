import assert from 'node:assert/strict';
import { test } from 'node:test';
import { providerError, providerMessage, scrub, transportError } from './provider-errors.js';

test('secrets and key-shaped tokens are scrubbed from provider messages', () => {
  assert.equal(scrub('bad key my-secret-value here', ['my-secret-value']), 'bad key [redacted] here');
  assert.equal(
    scrub('Incorrect API key provided: sk-proj-abc1****************wxyz.', []),
    'Incorrect API key provided: [redacted]',
  );
  assert.equal(
    scrub('x-goog key AIzaSyA1234567890abcdef is invalid', []),
    'x-goog key [redacted] is invalid',
  );
});

test('the message is read from each provider’s error shape', () => {
  assert.equal(providerMessage('{"error":{"message":"m1","type":"t"}}'), 'm1');
  assert.equal(providerMessage('{"type":"error","error":{"type":"x","message":"m2"}}'), 'm2');
  assert.equal(providerMessage('[{"error":{"code":400,"message":"m3"}}]'), 'm3');
  assert.equal(providerMessage('{"message":"m4"}'), 'm4');
  assert.equal(providerMessage('<html>Bad Gateway</html>'), '<html>Bad Gateway</html>');
});

test('statuses: the stored credential refused is a 502, not the caller’s 401; limits keep Retry-After', () => {
  const auth = providerError(
    'c1',
    401,
    '{"error":{"message":"Incorrect API key provided: sk-abcdefghijkl"}}',
    {},
    [],
  );
  assert.equal(auth.status, 502);
  assert.doesNotMatch(auth.detail, /sk-abcdefghijkl/);
  const limited = providerError('c1', 429, '{"error":{"message":"slow down"}}', { 'retry-after': '7' }, []);
  assert.equal(limited.status, 429);
  assert.equal(limited.headers['retry-after'], '7');
  assert.equal(providerError('c1', 400, '{"error":{"message":"bad"}}', {}, []).status, 400);
  assert.equal(providerError('c1', 404, '{"error":{"message":"no model"}}', {}, []).detail, 'no model');
  const overloaded = providerError(
    'c1',
    529,
    '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
    {},
    [],
  );
  assert.equal(overloaded.status, 529, 'Anthropic’s overloaded status is kept, not a generic 502');
  assert.equal(overloaded.error, 'PROVIDER_OVERLOADED');
  assert.equal(providerError('c1', 500, 'boom', {}, []).status, 502);
  assert.equal(
    transportError('c1', Object.assign(new Error('x'), { code: 'UND_ERR_HEADERS_TIMEOUT' })).status,
    504,
  );
  assert.equal(transportError('c1', Object.assign(new Error('x'), { code: 'ECONNREFUSED' })).status, 502);
});
