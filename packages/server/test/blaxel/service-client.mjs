// The unmodified @blaxel/core generated client against Berth's answers to the rest of the service's operations
// (decision 047). PHASE picks what to call: `catalog` (the server's catalogs, lists across parents, a model's
// revisions, a connection's model details), `users` (in the workspace of BL_WORKSPACE), `leave` (as the principal of
// BL_API_KEY). Prints `{call: {status, data, error}}` as one JSON line.
import {
  checkWorkspaceAvailability,
  createEgressGateway,
  createEgressIp,
  createIntegrationConnection,
  createModel,
  createVpc,
  getChangelog,
  getConfiguration,
  getIntegration,
  getIntegrationConnectionModel,
  getIntegrationConnectionModelEndpointConfigurations,
  getModel,
  getWorkspaceFeatures,
  inviteWorkspaceUser,
  leaveWorkspace,
  listAllEgressGateways,
  listAllEgressIps,
  listLocations,
  listMcpHubDefinitions,
  listModelRevisions,
  listPublicIps,
  listSandboxHubDefinitions,
  listWorkspaceUsers,
  removeWorkspaceUser,
  testFeatureFlag,
  updateModel,
  updateWorkspaceUserRole,
} from '@blaxel/core';

const out = {};
const call = async (name, p) => {
  const r = await p;
  out[name] = { status: r.response?.status, data: r.data, error: r.error };
  return r.data;
};
const phase = process.env.PHASE;

if (phase === 'catalog') {
  await call('mcpHub', listMcpHubDefinitions());
  await call('sandboxHub', listSandboxHubDefinitions());
  await call('locations', listLocations());
  await call('configuration', getConfiguration());
  await call('publicIps', listPublicIps());
  await call('publicIpsOtherRegion', listPublicIps({ query: { region: 'mars-1' } }));
  await call('features', getWorkspaceFeatures());
  await call('feature', testFeatureFlag({ path: { featureKey: 'drives' } }));
  await call('unknownFeature', testFeatureFlag({ path: { featureKey: 'teleport' } }));
  await call('changelog', getChangelog());
  await call('openai', getIntegration({ path: { integrationName: 'openai' } }));
  await call('httpApi', getIntegration({ path: { integrationName: 'http-api' } }));
  await call('unknownIntegration', getIntegration({ path: { integrationName: 'fax' } }));

  // Two VPCs holding a gateway of the same name, each with an IP: the workspace-wide lists show every parent's.
  for (const vpc of ['net-a', 'net-b']) {
    await createVpc({ body: { metadata: { name: vpc }, spec: {} }, throwOnError: true });
    await createEgressGateway({
      path: { vpcName: vpc },
      body: { metadata: { name: 'gw' }, spec: {} },
      throwOnError: true,
    });
    await createEgressIp({
      path: { vpcName: vpc, gatewayName: 'gw' },
      body: { metadata: { name: `ip-${vpc}` }, spec: {} },
      throwOnError: true,
    });
  }
  await call('allGateways', listAllEgressGateways());
  await call('allIpsPage1', listAllEgressIps({ query: { limit: 1 } }));
  await call(
    'allIpsPage2',
    listAllEgressIps({ query: { limit: 1, cursor: out.allIpsPage1.data?.meta?.nextCursor } }),
  );

  await createIntegrationConnection({
    body: {
      metadata: { name: 'fake-llm' },
      spec: {
        integration: 'openai-compatible',
        config: { baseUrl: process.env.PROVIDER_URL },
        secret: { apiKey: 'sk-fake-provider-key' },
      },
    },
    throwOnError: true,
  });
  const model = {
    metadata: { name: 'chat' },
    spec: { runtime: { type: 'openai-compatible', model: 'fake-1' }, integrationConnections: ['fake-llm'] },
  };
  await createModel({ body: model, throwOnError: true });
  await call('revisions', listModelRevisions({ path: { modelName: 'chat' } }));
  const got = await getModel({ path: { modelName: 'chat' }, throwOnError: true });
  await updateModel({
    path: { modelName: 'chat' },
    body: { ...got.data, spec: { ...got.data.spec, runtime: { ...got.data.spec.runtime, model: 'fake-2' } } },
    throwOnError: true,
  });
  await call('revisionsAfterUpdate', listModelRevisions({ path: { modelName: 'chat' } }));
  await call('revisionsOfNone', listModelRevisions({ path: { modelName: 'no-such-model' } }));
  await call(
    'connectionModel',
    getIntegrationConnectionModel({ path: { connectionName: 'fake-llm', modelId: 'fake-2' } }),
  );
  await call(
    'connectionModelUnknown',
    getIntegrationConnectionModel({ path: { connectionName: 'fake-llm', modelId: 'fake-9' } }),
  );
  await call(
    'endpointConfigurations',
    getIntegrationConnectionModelEndpointConfigurations({ path: { connectionName: 'fake-llm' } }),
  );
}

if (phase === 'users') {
  const invitee = process.env.INVITEE;
  await call('before', listWorkspaceUsers());
  await call('invite', inviteWorkspaceUser({ body: { email: invitee } }));
  await call('inviteNobody', inviteWorkspaceUser({ body: { email: 'no-such-principal' } }));
  await call('pending', listWorkspaceUsers());
  await call('reoffer', updateWorkspaceUserRole({ path: { subOrEmail: invitee }, body: { role: 'viewer' } }));
}

if (phase === 'members') {
  const invitee = process.env.INVITEE;
  await call('accepted', listWorkspaceUsers());
  await call('promote', updateWorkspaceUserRole({ path: { subOrEmail: invitee }, body: { role: 'member' } }));
  await call(
    'demoteLastAdmin',
    updateWorkspaceUserRole({ path: { subOrEmail: process.env.ADMIN }, body: { role: 'viewer' } }),
  );
  await call('remove', removeWorkspaceUser({ path: { subOrEmail: invitee } }));
  await call('removeAgain', removeWorkspaceUser({ path: { subOrEmail: invitee } }));
  await call('after', listWorkspaceUsers());
  await call('reinvite', inviteWorkspaceUser({ body: { email: invitee, role: 'member' } }));
}

if (phase === 'leave') {
  await call('leave', leaveWorkspace({ path: { workspaceName: process.env.TEAM } }));
  await call('leaveAgain', leaveWorkspace({ path: { workspaceName: process.env.TEAM } }));
  await call('leaveHome', leaveWorkspace({ path: { workspaceName: process.env.HOME_WORKSPACE } }));
  await call('taken', checkWorkspaceAvailability({ body: { name: process.env.TEAM } }));
  await call('free', checkWorkspaceAvailability({ body: { name: 'nobody-has-this' } }));
  await call(
    'takenWhy',
    checkWorkspaceAvailability({ body: { name: process.env.TEAM }, query: { withReason: true } }),
  );
  await call('invalidName', checkWorkspaceAvailability({ body: { name: 'Not_A_Label' } }));
}

process.stdout.write(JSON.stringify(out));
