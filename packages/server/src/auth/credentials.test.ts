import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { durationMs, looksLikeJwt, matchesHash, newApiKey, sha256 } from './credentials.js';

describe('credentials', () => {
  it('parses the durations of expires_in and refuses others', () => {
    assert.equal(durationMs('30s'), 30_000);
    assert.equal(durationMs('15m'), 900_000);
    assert.equal(durationMs('24h'), 86_400_000);
    assert.equal(durationMs('30d'), 30 * 86_400_000);
    assert.equal(durationMs('1w'), 604_800_000);
    for (const bad of ['0s', '1y', '', 'h', '-1d', '1.5h', '1 h'])
      assert.equal(durationMs(bad), undefined, bad);
  });

  it('tells a JWT from an API key by shape', () => {
    const key = newApiKey();
    assert.equal(looksLikeJwt(key), false);
    assert.equal(looksLikeJwt('eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl'), true);
    assert.equal(looksLikeJwt('a.b'), false);
  });

  it('makes distinct keys and matches a secret only against its own hash', () => {
    const a = newApiKey();
    const b = newApiKey();
    assert.notEqual(a, b);
    assert.match(a, /^bk_[A-Za-z0-9_-]{43}$/);
    assert.equal(matchesHash(a, sha256(a)), true);
    assert.equal(matchesHash(b, sha256(a)), false);
    assert.equal(matchesHash(a, 'not-hex'), false);
  });
});
