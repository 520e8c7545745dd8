// `berth get connections` as a table: an OAuth2 connection's token state (valid until, last refresh, last error),
// other connections with none; the provider's long error cut to the column.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connectionRows, relative } from './connections.js';

const NOW = Date.parse('2026-11-26T12:00:00Z');

test('an OAuth2 connection shows its token state; others show none', () => {
  const out = connectionRows(
    [
      {
        metadata: { name: 'mail-alice' },
        spec: { integration: 'oauth2', secret: { REFRESH_TOKEN: '********' } },
        token: { state: 'VALID', validUntil: '2026-11-26T12:45:00Z', lastRefreshAt: '2026-11-26T11:59:30Z' },
      },
      {
        metadata: { name: 'mail-bob' },
        spec: { integration: 'google' },
        token: {
          state: 'FAILED',
          lastRefreshAt: '2026-11-26T09:00:00Z',
          lastError: `refresh token missing or refresh fails: invalid_grant ${'x'.repeat(200)}`,
        },
      },
      { metadata: { name: 'openai' }, spec: { integration: 'openai' } },
    ],
    NOW,
  ).split('\n');
  assert.match(out[0], /^NAME\s+INTEGRATION\s+TOKEN\s+VALID UNTIL\s+LAST REFRESH\s+LAST ERROR$/);
  assert.match(out[1], /^mail-alice\s+oauth2\s+VALID\s+in 45m\s+30s ago\s+-$/);
  assert.match(
    out[2],
    /^mail-bob\s+google\s+FAILED\s+-\s+3h ago\s+refresh token missing or refresh fails: invalid_grant x+…$/,
  );
  assert.ok(out[2].length < 200);
  assert.match(out[3], /^openai\s+openai\s+-\s+-\s+-\s+-$/);
});

test('relative times', () => {
  assert.equal(relative('2026-11-26T12:00:10Z', NOW), 'in 10s');
  assert.equal(relative('2026-11-26T10:00:00Z', NOW), '2h ago');
  assert.equal(relative(undefined, NOW), '-');
});
