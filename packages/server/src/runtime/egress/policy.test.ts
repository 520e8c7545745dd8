// The matcher every egress decision goes through (proxy, transparent proxy, DNS): wildcards, case, trailing
// dots, IDN, lookalikes and address literals.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decide, matchesPattern, normalizeHost, ruleFor } from './policy.js';

test('a wildcard matches strict subdomains only, never the apex or a lookalike', () => {
  const table: Array<[string, boolean]> = [
    ['a.example.test', true],
    ['a.b.example.test', true],
    ['A.EXAMPLE.test.', true],
    ['example.test', false],
    ['evilexample.test', false],
    ['example.test.evil.test', false],
    ['xexample.test', false],
  ];
  for (const [host, want] of table)
    assert.equal(matchesPattern('*.example.test', normalizeHost(host) ?? ''), want, host);
});

test('names are compared lowercase, without a trailing dot, in their ASCII (IDNA) form', () => {
  assert.equal(normalizeHost('EXAMPLE.test.'), 'example.test');
  assert.equal(normalizeHost('bücher.test'), 'xn--bcher-kva.test');
  assert.ok(decide({ allowedDomains: ['xn--bcher-kva.test'], forbiddenDomains: [] }, 'BÜCHER.test').allow);
  assert.ok(decide({ allowedDomains: ['bücher.test'], forbiddenDomains: [] }, 'xn--bcher-kva.test').allow);
});

test('address literals, zone ids and ports are not names: they match nothing, not even *', () => {
  for (const h of ['1.2.3.4', '[::1]', '::1', '1.2.3.4%x.example.test', 'example.test:443', '', '.', 'a..b'])
    assert.equal(normalizeHost(h), undefined, h);
  assert.equal(decide({ allowedDomains: ['*'], forbiddenDomains: [] }, '127.0.0.1').allow, false);
  assert.equal(decide({ allowedDomains: ['*'], forbiddenDomains: [] }, '0x7f.1').allow, false);
});

test('deny wins over allow; an allow list refuses everything else; a deny list alone lets the rest through', () => {
  const both = {
    allowedDomains: ['*.example.test', 'example.test'],
    forbiddenDomains: ['secret.example.test'],
  };
  assert.equal(decide(both, 'api.example.test').allow, true);
  assert.equal(decide(both, 'example.test').allow, true);
  assert.equal(decide(both, 'secret.example.test').allow, false);
  assert.equal(decide(both, 'other.test').allow, false);
  const denyOnly = { allowedDomains: [], forbiddenDomains: ['*.bad.test'] };
  assert.equal(decide(denyOnly, 'x.bad.test').allow, false);
  assert.equal(decide(denyOnly, 'good.test').allow, true);
});

test('a bypassed host gets no routing rule (no interception) but stays under the allow and deny lists', () => {
  const policy = {
    allowedDomains: ['*.example.test'],
    forbiddenDomains: ['bad.example.test'],
    bypass: ['pinned.example.test', 'bad.example.test'],
    routing: [{ destinations: ['*'], headers: { authorization: 'x' } }],
  };
  assert.equal(ruleFor(policy, 'PINNED.example.test.'), undefined);
  assert.ok(ruleFor(policy, 'other.example.test'));
  assert.ok(decide(policy, 'pinned.example.test').allow);
  assert.equal(decide(policy, 'bad.example.test').allow, false);
  assert.equal(decide(policy, 'elsewhere.test').allow, false);
});
