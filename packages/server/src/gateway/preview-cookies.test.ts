import assert from 'node:assert/strict';
import { test } from 'node:test';
import { scopeResponseHead, scopeSetCookie, scopeSetCookies } from './preview-cookies.js';

const base = '/run/ws/previews/box/web/';

test('a path-form preview cannot toss cookies at other previews: a Path outside its prefix is pulled back into it', () => {
  assert.equal(
    scopeSetCookie('bl_preview_token=evil; Path=/run/; HttpOnly', base),
    `bl_preview_token=evil; Path=${base}; HttpOnly`,
  );
  assert.equal(scopeSetCookie('a=1; path=/', base), `a=1; Path=${base}`);
  assert.equal(scopeSetCookie('a=1; Path=/run/ws/previews/box/web2', base), `a=1; Path=${base}`);
  assert.equal(
    scopeSetCookie('a=1', base),
    `a=1; Path=${base}`,
    'no Path would default to the parent directory',
  );
});

test('a cookie already inside the preview keeps its Path and attributes', () => {
  assert.equal(scopeSetCookie(`a=1; Path=${base}assets; Secure`, base), `a=1; Path=${base}assets; Secure`);
  assert.equal(
    scopeSetCookie('a=1; Path=/run/ws/previews/box/web', base),
    'a=1; Path=/run/ws/previews/box/web',
  );
});

test('a cookie that names a Domain is dropped, in the path form and on a host of its own', () => {
  assert.equal(scopeSetCookie('a=1; Domain=example.com; Path=/', base), undefined);
  assert.equal(scopeSetCookie('a=1; Domain=.local.berth.test', '/'), undefined);
  assert.equal(scopeSetCookie('a=1; Path=/', '/'), 'a=1; Path=/', 'a host of its own is its own origin');
  assert.deepEqual(scopeSetCookies(['a=1; domain=x', 'b=2; Path=/'], base), [`b=2; Path=${base}`]);
  assert.equal(scopeSetCookies(['a=1; Domain=x'], base), undefined);
});

test("an upgrade's raw response head gets the same treatment", () => {
  const head =
    'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nset-cookie: bl_preview_token=evil; Path=/run/\r\nSet-Cookie: w=1; Domain=x\r\n\r\n';
  assert.equal(
    scopeResponseHead(head, base),
    `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSet-Cookie: bl_preview_token=evil; Path=${base}\r\n\r\n`,
  );
});
