// What an OAuth2 connection's spec must hold (§5 step 5) and what its config means, presets included.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { oauth2Config, oauth2Issues, REFRESH_FAILED } from './oauth2.js';

const secret = { CLIENT_ID: 'app', CLIENT_SECRET: 's', REFRESH_TOKEN: 'rt' };
const pointers = (spec: any) => oauth2Issues(spec).map((i) => i.pointer);

test('a generic oauth2 connection needs its token endpoint, the client id and a refresh token', () => {
  assert.deepEqual(
    pointers({ integration: 'oauth2', config: { tokenUrl: 'https://idp/token' }, secret }),
    [],
  );
  assert.deepEqual(pointers({ integration: 'oauth2', secret }), ['/spec/config/tokenUrl']);
  assert.deepEqual(
    pointers({ integration: 'oauth2', config: { tokenUrl: 'https://u:p@idp/token' }, secret }),
    ['/spec/config/tokenUrl'],
  );
  const missing = oauth2Issues({ integration: 'google', secret: { CLIENT_ID: 'app' } });
  assert.deepEqual(
    missing.map((i) => i.pointer),
    ['/spec/secret/REFRESH_TOKEN'],
  );
  assert.ok(missing[0].message.startsWith(REFRESH_FAILED));
  assert.match(missing[0].message, /access_type=offline/);
  assert.deepEqual(pointers({ integration: 'google', secret: { REFRESH_TOKEN: 'rt' } }), [
    '/spec/secret/CLIENT_ID',
  ]);
  assert.deepEqual(
    pointers({ integration: 'openai', secret: {} }),
    [],
    'other integrations are not judged here',
  );
});

test('API domains are names, never every destination; client authentication is one of the two', () => {
  const spec = (config: any) => ({ integration: 'google', config, secret });
  assert.deepEqual(pointers(spec({ apiDomains: ['gmail.googleapis.com', '*.example.com'] })), []);
  assert.deepEqual(pointers(spec({ apiDomains: ['*'] })), ['/spec/config/apiDomains/0']);
  assert.deepEqual(pointers(spec({ apiDomains: ['https://x.example/'] })), ['/spec/config/apiDomains/0']);
  assert.deepEqual(pointers(spec({ clientAuth: 'private_key_jwt' })), ['/spec/config/clientAuth']);
  assert.deepEqual(pointers(spec({ scopes: 7 })), ['/spec/config/scopes']);
});

test('a preset fills the addresses; the config overrides them', () => {
  const g = oauth2Config({ integration: 'google' });
  assert.equal(g?.tokenUrl, 'https://oauth2.googleapis.com/token');
  assert.deepEqual(g?.apiDomains, ['gmail.googleapis.com', 'www.googleapis.com']);
  const own = oauth2Config({
    integration: 'oauth2',
    config: { tokenUrl: 'https://idp/token', scopes: 'a b', apiDomains: ['api.example'] },
  });
  assert.deepEqual(
    [own?.tokenUrl, own?.scopes, own?.apiDomains, own?.clientAuth],
    ['https://idp/token', ['a', 'b'], ['api.example'], 'client_secret_post'],
  );
  assert.equal(oauth2Config({ integration: 'http-api' }), undefined);
});
