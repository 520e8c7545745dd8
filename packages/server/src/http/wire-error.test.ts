// How a store failure reaches the wire: a write refused by a fence (this server stopped leading, or its node no longer
// holds the sandbox) is a 503 to retry through another server, never a 500.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FencedError, type ResourceKey } from '../store/store.js';
import { wireErrorOf } from './wire-error.js';

const KEY: ResourceKey = { kind: 'Job', workspace: 'ws', parent: '', name: 'nightly' };

test('a write refused by a fence answers 503 with Retry-After, saying why', () => {
  const lead = wireErrorOf(new FencedError(KEY, 'lead'));
  assert.equal(lead.status, 503);
  assert.equal(lead.headers['retry-after'], '1');
  assert.match(lead.detail, /no longer leads the cluster/);
  const held = wireErrorOf(new FencedError({ ...KEY, kind: 'Sandbox' }, 'placement'));
  assert.equal(held.status, 503);
  assert.match(held.detail, /no longer holds Sandbox "nightly"/);
});
