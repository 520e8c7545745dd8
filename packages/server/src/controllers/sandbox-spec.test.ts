import assert from 'node:assert/strict';
import { test } from 'node:test';
import { unenforcedNetworkFields, unenforcedNote } from './sandbox-spec.js';

test('network fields the runtime does not enforce are named in the DEPLOYED note', () => {
  assert.deepEqual(unenforcedNetworkFields({ allowedDomains: ['example.com'] }), []);
  assert.equal(unenforcedNote({ network: { allowedDomains: ['example.com'] } }), '');
  const network = { egress: { policies: ['p'] }, proxy: { bypass: ['*.internal'] } };
  assert.deepEqual(unenforcedNetworkFields(network), ['network.egress.policies', 'network.proxy.bypass']);
  assert.equal(
    unenforcedNote({ network }),
    '; not enforced yet: network.egress.policies, network.proxy.bypass',
  );
});
