// Runs the unmodified @blaxel/core generated client against Berth (env from the parent test) and prints the results.
import {
  createIntegrationConnection,
  createPolicy,
  deleteIntegrationConnection,
  deletePolicy,
  getIntegrationConnection,
  getPolicy,
  listIntegrationConnections,
  listPolicies,
  settings,
} from '@blaxel/core';

await settings.authenticate?.();
const out = {};
const call = async (name, p) => {
  const r = await p;
  out[name] = { status: r.response?.status, data: r.data, error: r.error };
};
await call(
  'createPolicy',
  createPolicy({
    body: {
      metadata: { name: 'sdk-policy', displayName: 'From the SDK', labels: { team: 'a' } },
      spec: { type: 'location', locations: [{ name: 'local', type: 'region' }], resourceTypes: ['sandbox'] },
    },
  }),
);
await call(
  'createPolicyAgain',
  createPolicy({
    body: {
      metadata: { name: 'sdk-policy' },
      spec: { type: 'location', locations: [{ name: 'local', type: 'region' }] },
    },
  }),
);
await call('listPolicies', listPolicies());
await call('getPolicy', getPolicy({ path: { policyName: 'sdk-policy' } }));
await call(
  'createIntegrationConnection',
  createIntegrationConnection({
    body: {
      metadata: { name: 'sdk-conn', displayName: 'OpenAI' },
      spec: { integration: 'openai', secret: { apiKey: process.env.PLANTED_SECRET }, config: {} },
    },
  }),
);
await call('listIntegrationConnections', listIntegrationConnections());
await call('getIntegrationConnection', getIntegrationConnection({ path: { connectionName: 'sdk-conn' } }));
await call(
  'deleteIntegrationConnection',
  deleteIntegrationConnection({ path: { connectionName: 'sdk-conn' } }),
);
await call('deletePolicy', deletePolicy({ path: { policyName: 'sdk-policy' } }));
await call('getPolicyAfterDelete', getPolicy({ path: { policyName: 'sdk-policy' } }));
process.stdout.write(JSON.stringify(out));
