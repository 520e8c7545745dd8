// `berth get connections` as a table: an OAuth2 connection's token state (valid until, last refresh, last error),
// other connections with none; the provider's long error cut to the column.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { relative } from './format.js';
import { render } from './output.js';

const CONNECTION = { kind: 'IntegrationConnection', hasStatus: false };

test('an OAuth2 connection shows its token state; others show none', () => {
  const at = (s: number) => new Date(Date.now() + s * 1000).toISOString();
  const out = render(
    [
      {
        metadata: { name: 'mail-alice', createdAt: at(-600) },
        spec: { integration: 'oauth2', secret: { REFRESH_TOKEN: '********' } },
        token: { state: 'VALID', validUntil: at(45 * 60 + 30), lastRefreshAt: at(-30) },
      },
      {
        metadata: { name: 'mail-bob', createdAt: at(-4 * 3600) },
        spec: { integration: 'google' },
        token: {
          state: 'FAILED',
          lastRefreshAt: at(-3 * 3600 - 60),
          lastError: `refresh token missing or refresh fails:\n invalid_grant ${'x'.repeat(200)}`,
        },
      },
      { metadata: { name: 'openai', createdAt: at(-60) }, spec: { integration: 'openai' } },
    ],
    'table',
    CONNECTION,
    false,
  ).split('\n');
  assert.match(out[0], /^NAME\s+INTEGRATION\s+TOKEN\s+VALID UNTIL\s+LAST REFRESH\s+AGE\s+LAST ERROR$/);
  assert.match(out[1], /^mail-alice\s+oauth2\s+VALID\s+in 45m\s+30s ago\s+10m\s+-$/);
  assert.match(
    out[2],
    /^mail-bob\s+google\s+FAILED\s+-\s+3h ago\s+4h\s+refresh token missing or refresh fails: invalid_grant x+…$/,
  );
  assert.ok(out[2].length < 200);
  assert.match(out[3], /^openai\s+openai\s+-\s+-\s+-\s+60s\s+-$/);
});

test('relative times', () => {
  const NOW = Date.parse('2026-11-26T12:00:00Z');
  assert.equal(relative('2026-11-26T12:00:10Z', NOW), 'in 10s');
  assert.equal(relative('2026-11-26T10:00:00Z', NOW), '2h ago');
  assert.equal(relative(undefined, NOW), '-');
});
