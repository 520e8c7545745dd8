// Drives applications through the unmodified @blaxel/core SDK (its ApplicationInstance and generated client) against
// Berth (env from the parent test) and prints what it saw. Step `create` creates and waits for DEPLOYED; `update`
// changes its envs; `bound` creates an application bound to a sandbox; `claim` and `verify` a custom domain (verify
// also names it in the application's urls and offers it to tenant-b); `delete` removes the applications.
import {
  ApplicationInstance,
  createApplication,
  createApplicationCustomDomain,
  createCustomDomain,
  deleteApplication,
  getApplication,
  getCustomDomain,
  listApplications,
  listCustomDomainShares,
  listCustomDomains,
  shareCustomDomain,
  updateCustomDomain,
  verifyCustomDomain,
} from '@blaxel/core';

const step = process.argv[2];
const out = {};
const wait = async (name, status) => {
  for (let i = 0; i < 600; i++) {
    const a = await ApplicationInstance.get(name);
    if (a.status === status || a.status === 'FAILED') return a;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${name} never ${status}`);
};
if (step === 'create') {
  const created = await ApplicationInstance.create({
    name: 'web',
    image: process.env.APP_IMAGE,
    port: 3000,
    memory: 256,
    envs: [{ name: 'GREETING', value: 'hello' }],
  });
  out.created = { name: created.name, spec: created.spec, status: created.status };
  const app = await wait('web', 'DEPLOYED');
  out.deployed = { status: app.status, metadata: app.metadata, events: app.events };
  out.list = (await ApplicationInstance.list()).map((a) => a.name);
  out.revisions = await app.listRevisions();
  const again = await createApplication({
    body: { metadata: { name: 'web' }, spec: { image: process.env.APP_IMAGE } },
  });
  out.again = { status: again.response.status };
}
if (step === 'update') {
  await ApplicationInstance.update('web', { envs: [{ name: 'GREETING', value: 'bonjour' }] });
  const app = await wait('web', 'DEPLOYED');
  out.updated = { status: app.status, spec: app.spec };
  out.revisions = await app.listRevisions();
}
if (step === 'bound') {
  const r = await createApplication({
    body: {
      metadata: { name: 'bound' },
      spec: {
        extensions: { 'ai.blaxel.experimental/bind-to-sandbox': { sandbox: process.env.SANDBOX } },
        port: 3001,
      },
    },
  });
  out.bound = { status: r.response.status, error: r.error };
  out.boundState = (await wait('bound', 'DEPLOYED')).status;
  const legacy = await createApplication({
    body: { metadata: { name: 'legacy' }, spec: { proxy: true, image: process.env.SANDBOX, port: 3001 } },
  });
  out.legacy = { status: legacy.response.status, error: legacy.error };
  const unknown = await createApplication({
    body: {
      metadata: { name: 'urls' },
      spec: { image: process.env.APP_IMAGE, urls: [{ domain: 'a.example.com' }] },
    },
  });
  out.urls = { status: unknown.response.status, error: unknown.error };
  const list = await listApplications();
  out.list = (list.data.data ?? list.data).map((a) => a.metadata.name).sort();
}
const result = (r) => ({ status: r.response.status, data: r.data, error: r.error });
if (step === 'claim') {
  out.claimed = result(await createCustomDomain({ body: { metadata: { name: 'shop.example.test' } } }));
  out.again = result(await createCustomDomain({ body: { metadata: { name: 'shop.example.test' } } }));
  out.forApp = result(
    await createApplicationCustomDomain({
      path: { applicationName: 'web' },
      body: { metadata: { name: 'www.example.test' } },
    }),
  );
  out.bad = result(await createCustomDomain({ body: { metadata: { name: '*.example.test' } } }));
  out.failed = result(await verifyCustomDomain({ path: { domainName: 'shop.example.test' } }));
  out.list = result(await listCustomDomains());
}
if (step === 'verify') {
  out.verified = result(await verifyCustomDomain({ path: { domainName: 'shop.example.test' } }));
  out.updated = result(
    await updateCustomDomain({
      path: { domainName: 'shop.example.test' },
      body: { metadata: { name: 'shop.example.test', displayName: 'Shop' }, spec: out.verified.data.spec },
    }),
  );
  const app = await ApplicationInstance.update('web', {
    metadata: { name: 'web' },
    spec: { urls: [{ domain: 'shop.example.test' }] },
  });
  const deployed = await wait(app.name, 'DEPLOYED');
  out.app = { status: deployed.status, spec: deployed.spec };
  out.get = result(await getCustomDomain({ path: { domainName: 'shop.example.test' } }));
  out.share = result(
    await shareCustomDomain({
      path: { domainName: 'shop.example.test' },
      body: { targetWorkspace: 'tenant-b' },
    }),
  );
  out.shares = result(await listCustomDomainShares({ path: { domainName: 'shop.example.test' } }));
}
if (step === 'delete') {
  for (const n of ['web', 'bound', 'legacy'])
    out[n] = (await deleteApplication({ path: { applicationName: n } })).response.status;
  out.after = (await getApplication({ path: { applicationName: 'web' } })).response.status;
}
process.stdout.write(JSON.stringify(out));
