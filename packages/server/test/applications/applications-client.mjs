// Drives applications through the unmodified @blaxel/core SDK (its ApplicationInstance and generated client) against
// Berth (env from the parent test) and prints what it saw. Step `create` creates and waits for DEPLOYED; `update`
// changes its envs; `bound` creates an application bound to a sandbox; `delete` removes both.
import {
  ApplicationInstance,
  createApplication,
  deleteApplication,
  getApplication,
  listApplications,
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
if (step === 'delete') {
  for (const n of ['web', 'bound', 'legacy'])
    out[n] = (await deleteApplication({ path: { applicationName: n } })).response.status;
  out.after = (await getApplication({ path: { applicationName: 'web' } })).response.status;
}
process.stdout.write(JSON.stringify(out));
