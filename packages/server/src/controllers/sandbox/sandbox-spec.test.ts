// What a sandbox's `network` turns into for the runtime (egress policy), and what of it is named as not enforced.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { egressPolicyOf, unenforcedNetworkFields, unenforcedNote } from './sandbox-spec.js';

test('only egress.policies destinations that are addresses are named in the DEPLOYED note', () => {
  assert.deepEqual(unenforcedNetworkFields({ allowedDomains: ['example.com'] }), []);
  assert.equal(unenforcedNote({ network: { allowedDomains: ['example.com'] } }), '');
  const enforced = {
    egress: { policies: [{ name: 'api', mode: 'allow', destinations: ['api.example.com'] }] },
    proxy: { bypass: ['*.internal'] },
  };
  assert.deepEqual(unenforcedNetworkFields(enforced), []);
  const network = {
    egress: {
      policies: [
        { destinations: ['203.0.113.0/24', 'fd00::1', 'ok.example'] },
        { mode: 'deny', destinations: ['198.51.100.0/24'] },
      ],
    },
  };
  assert.equal(
    unenforcedNote({ network }),
    '; not enforced yet: network.egress.policies destinations that are addresses (fd00::1, 198.51.100.0/24)',
  );
});

test('egress.policies add their domains to the allow and deny lists; bypass rides along with routing', () => {
  const p = egressPolicyOf({
    allowedDomains: ['a.example'],
    egress: {
      policies: [
        { name: 'apis', destinations: ['api.example', '10.1.2.3/8', '203.0.113.7'] },
        { name: 'no-ads', mode: 'deny', destinations: ['*.ads.example'] },
      ],
    },
    proxy: {
      bypass: ['pinned.example'],
      routing: [{ destinations: ['*'], headers: { 'x-k': '{{SECRET:k}}' }, secrets: { k: 'v' } }],
    },
  });
  assert.deepEqual(p?.allowedDomains, ['a.example', 'api.example']);
  assert.deepEqual(p?.forbiddenDomains, ['*.ads.example']);
  assert.deepEqual(p?.bypass, ['pinned.example']);
  assert.deepEqual(p?.rawCidrs, ['10.0.0.0/8', '203.0.113.7/32'], 'raw TCP ranges, host bits cleared');
  // A deny rule alone puts the sandbox under a policy (a deny list: the rest stays reachable).
  assert.deepEqual(
    egressPolicyOf({ egress: { policies: [{ mode: 'deny', destinations: ['x.example'] }] } }),
    {
      allowedDomains: [],
      forbiddenDomains: ['x.example'],
    },
  );
});
