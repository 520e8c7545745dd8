// Tenant A's workspace with one object of every kind and sub-resource the API can create (from the kinds' own
// samples), a viewer and a member beside its admin, and what a test needs to aim at them: for each path
// parameter name, A's values; the secrets only A's admin may read with show_secrets; the strings that only
// A's answers hold. Tenant B gets a sandbox and a private preview of its own (its preview token is a credential
// it may hold), tenant C is the principal A has invited.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createHash } from 'node:crypto';
import yazl from 'yazl';
import { KINDS } from '../../src/kinds/index.js';
import { SAMPLES } from '../../src/kinds/samples.js';
import type { KindDescriptor } from '../../src/kinds/types.js';
import { tarOf } from '../../src/runtime/images/test-support/registry.js';
import type { TestServer } from '../../src/test-support/server.js';
import { newTenant, type Tenant } from '../../src/test-support/tenants.js';

/** Small sandboxes: the test starts two. */
const MEMORY_MB = 256;
export const REGION = 'local';
const tag = () => randomBytes(6).toString('hex');

export interface World {
  a: Tenant;
  b: Tenant;
  /** The principal A invited (a pending invitation of A's workspace). */
  c: Tenant;
  aViewerKey: string;
  aMemberKey: string;
  /** Path parameter name → A's values (a parameter may name an object several ways: an image by name, id, digest). */
  values: Record<string, string[]>;
  /** Query parameter `labels` that selects A's objects. */
  labelSelector: string;
  /** Secret values of A's objects: no answer may hold one except to A's admin asking with show_secrets. */
  secrets: string[];
  /** Strings only A's objects hold (ids, digests, label values, secrets, its workspace name). */
  markers: string[];
  /** A's objects by kind (a preview's parent is its sandbox), for the data-plane addresses. */
  objects: Record<string, { name: string; parent: string }>;
  /** A's agent's custom http trigger path. */
  triggerPath: string;
  /** A's preview's `spec.prefixUrl` (its `{run}/<ws>/<prefix>` address). */
  previewPrefix: string;
  /** A JWT of an admin account of B's (POST /v0/oauth/token): the other kind of credential. */
  bJwt: string;
  /** B's own private preview and a valid token of it. */
  bPreview: { sandbox: string; name: string; token: string };
}

type Api = (path: string, init?: RequestInit & { key?: string | null; json?: unknown }) => Promise<Response>;

async function ok(res: Response, what: string): Promise<any> {
  const text = await res.text();
  assert.ok(res.ok, `${what}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

function zip(files: Record<string, string>): Promise<Buffer> {
  const z = new yazl.ZipFile();
  for (const [name, body] of Object.entries(files)) z.addBuffer(Buffer.from(body), name);
  z.end();
  const chunks: Buffer[] = [];
  return new Promise((resolve, reject) => {
    z.outputStream.on('data', (c: Buffer) => chunks.push(c));
    z.outputStream.on('end', () => resolve(Buffer.concat(chunks)));
    z.outputStream.on('error', reject);
  });
}

/** A `docker save` archive of a one-layer image named `name`. */
async function imageArchive(name: string, content: string): Promise<Buffer> {
  const layer = await tarOf([{ name: 'hello.txt', body: content }]);
  const diffId = `sha256:${createHash('sha256').update(layer).digest('hex')}`;
  const config = JSON.stringify({
    architecture: process.arch === 'arm64' ? 'arm64' : 'amd64',
    os: 'linux',
    config: { Env: ['PATH=/bin'] },
    rootfs: { type: 'layers', diff_ids: [diffId] },
  });
  const manifest = JSON.stringify([{ Config: 'config.json', RepoTags: [name], Layers: ['layer.tar'] }]);
  return tarOf([
    { name: 'manifest.json', body: manifest },
    { name: 'config.json', body: config },
    { name: 'layer.tar', body: layer },
  ]);
}

async function waitFor(api: Api, path: string, key: string, pred: (b: any) => boolean, what: string) {
  let last: unknown;
  for (let i = 0; i < 1200; i++) {
    const r = await api(path, { key });
    last = await r.json();
    if (r.ok && pred(last)) return last as any;
    await new Promise((res) => setTimeout(res, 100));
  }
  assert.fail(`${path} never reached ${what}; last: ${JSON.stringify(last)}`);
}

/** The collection path of a kind with its parents filled in, e.g. /vpcs/net/egressgateways. */
function collectionOf(kd: KindDescriptor, parents: string[]) {
  let i = 0;
  return kd.path.replace(/\{\w+\}/g, () => parents[i++]);
}

export async function buildWorld(s: TestServer, names: { a: string; b: string; c: string }): Promise<World> {
  const api: Api = s.api.bind(s);
  const [a, b, c] = [await newTenant(s, names.a), await newTenant(s, names.b), await newTenant(s, names.c)];
  const secrets: string[] = [];
  const markers: string[] = [names.a];
  const secret = (what: string) => {
    const v = `${names.a}-${what}-secret-${tag()}`;
    secrets.push(v);
    return v;
  };
  const label = `${names.a}-label-${tag()}`;
  markers.push(label);
  const values: Record<string, string[]> = { workspaceName: [names.a] };
  const asA = { key: a.key };

  // Accounts: a viewer and a member of A (the member's key is the one A's key routes name), C invited.
  const account = async (role: string) => {
    const sa = await ok(
      await api('/service_accounts', { method: 'POST', json: { name: `${names.a}-${role}`, role }, ...asA }),
      `create ${role}`,
    );
    const k = await ok(
      await api(`/service_accounts/${sa.client_id}/api_keys`, {
        method: 'POST',
        json: { name: role },
        ...asA,
      }),
      `key of ${role}`,
    );
    secrets.push(sa.client_secret, k.apiKey);
    markers.push(sa.client_id, k.id);
    return { id: sa.client_id as string, key: k.apiKey as string, keyId: k.id as string };
  };
  const viewer = await account('viewer');
  const member = await account('member');
  values.clientId = [member.id];
  values.apiKeyId = [member.keyId];
  values.subject = [member.id];
  values.subOrEmail = [member.id];
  values.invitee = [c.id];
  const invited = await api(`/workspaces/${names.a}/members/${c.id}`, {
    method: 'PUT',
    json: { role: 'viewer' },
    ...asA,
  });
  assert.equal(invited.status, 202, await invited.text());
  markers.push(a.id);

  // One object of every kind, from the samples, labelled, with secrets where the kind keeps some.
  const objects: World['objects'] = {};
  const triggerPath = `${names.a}-hook`;
  const previewPrefix = `${names.a}-pfx`;
  const externalId = `${names.a}-ext-${tag()}`;
  markers.push(externalId);
  values.externalId = [externalId];
  for (const kd of KINDS) {
    const sample = SAMPLES[kd.kind];
    assert.ok(sample, `kind ${kd.kind} has a sample (src/kinds/samples.ts)`);
    const body: any = structuredClone(sample.valid);
    body.metadata.labels = { owner: label };
    const envs = [{ name: 'TOKEN', value: secret(kd.kind.toLowerCase()), secret: true }];
    // A closed local port: listing the provider's models fails at once, and nothing leaves the host.
    if (kd.kind === 'IntegrationConnection')
      body.spec = {
        ...body.spec,
        secret: { apiKey: secret('connection') },
        config: { baseUrl: 'https://llm.example.test/v1' },
      };
    // Every kind that takes an externalId gets the same one: `{externalId}` is then A's in every path.
    if (kd.metadataInput?.externalId) body.metadata.externalId = externalId;
    if (kd.kind === 'Sandbox') body.spec.runtime = { ...body.spec.runtime, memory: MEMORY_MB, envs };
    if (kd.kind === 'Agent') {
      // Long enough that its host label is the hashed form (`agt--<hash>`), which shows no name.
      body.metadata.name = `${body.metadata.name}-${'x'.repeat(50)}`;
      body.spec.runtime.envs = envs;
      body.spec.triggers = [{ id: 'hook', type: 'http', configuration: { path: triggerPath } }];
    }
    if (kd.kind === 'Function') body.spec.runtime.envs = envs;
    // A job from code (below), so that it can have executions: no image, the host's Python.
    if (kd.kind === 'Job') {
      body.spec.runtime = { memory: MEMORY_MB, envs };
      body.spec.triggers = [{ id: 'run', type: 'http' }];
    }
    if (kd.kind === 'Preview') {
      body.spec.public = false;
      body.spec.prefixUrl = previewPrefix;
    }
    const created = await ok(
      await api(collectionOf(kd, sample.parents), { method: 'POST', json: body, ...asA }),
      `create ${kd.kind}`,
    );
    if (created.metadata.uid) markers.push(created.metadata.uid);
    objects[kd.kind] = { name: body.metadata.name, parent: sample.parents.at(-1) ?? '' };
    values[kd.nameParam] = [body.metadata.name];
    for (const [i, p] of (kd.parents ?? []).entries()) values[p.param] ??= [sample.parents[i]];
  }
  const sandbox = objects.Sandbox.name;
  const preview = objects.Preview.name;

  // Sub-resources.
  const token = await ok(
    await api(`/sandboxes/${sandbox}/previews/${preview}/tokens`, {
      method: 'POST',
      json: { spec: { expiresAt: new Date(Date.now() + 86_400_000).toISOString() } },
      ...asA,
    }),
    'preview token',
  );
  secrets.push(token.spec.token);
  values.tokenName = [token.metadata.name];
  const schedule = await ok(
    await api(`/sandboxes/${sandbox}/schedules`, {
      method: 'POST',
      json: { type: 'cron', value: '0 0 1 1 *', input: { command: 'true', env: { K: secret('schedule') } } },
      ...asA,
    }),
    'sandbox schedule',
  );
  values.scheduleId = [schedule.id];
  markers.push(schedule.id);
  // A snapshot of A's sandbox (decision 053): its id and its name reach it.
  const snapshot = await ok(
    await api(`/sandboxes/${sandbox}/snapshots`, {
      method: 'POST',
      json: { name: `${names.a}-snap` },
      ...asA,
    }),
    'sandbox snapshot',
  );
  values.snapshotName = [snapshot.id, snapshot.name];
  values.snapshotId = [snapshot.id, snapshot.name];
  markers.push(snapshot.id);
  const template = objects.VolumeTemplate.name;
  const version = `${names.a}-v1`;
  await ok(
    await api(`/volume_templates/${template}/versions/${version}`, { method: 'PUT', json: {}, ...asA }),
    'volume template version',
  );
  values.versionName = [version];
  const imageName = `${names.a}/private-tool:1`;
  const [image] = await ok(
    await api('/images/import', {
      method: 'POST',
      body: new Uint8Array(await imageArchive(imageName, `${names.a} only`)),
      headers: { 'content-type': 'application/x-tar' },
      ...asA,
    }),
    'image import',
  );
  values.imageName = [...new Set([imageName, image.id, image.digest])];
  // A body names an image by `reference` (a pull) or `image` (what a sandbox or workload runs on).
  values.reference = [imageName];
  values.image = values.imageName;
  // Not its references: a pull of the same name by another workspace is answered with the name it asked for.
  markers.push(image.id, image.digest, ...image.layers.map((l: { digest: string }) => l.digest));
  // The same image in the service's two parts (`{resourceType}/{imageName}`), one tag of it, and a share of it with
  // C's workspace that waits for C's answer.
  values.resourceType = [names.a];
  values.typedImageName = ['private-tool:1', 'private-tool'];
  values.tagName = ['1'];
  values.targetWorkspace = [names.c];
  const share = await ok(
    await api(`/images/${names.a}/private-tool/share`, {
      method: 'POST',
      json: { targetWorkspace: names.c },
      ...asA,
    }),
    'image share',
  );
  values.pendingShareId = [share.id];
  markers.push(share.id);
  // A custom domain A claimed (pending: no resolver here holds its TXT record); its challenge token is A's.
  const domain = `${names.a}.domains.example.test`;
  const claimed = await ok(
    await api('/customdomains', { method: 'POST', json: { metadata: { name: domain } }, ...asA }),
    'custom domain',
  );
  values.domainName = [domain];
  // The server's own node (the operator's, never A's): B may no more drain it than A may.
  values.nodeId = [(await ok(await api('/nodes'), 'nodes'))[0].id];
  markers.push(...Object.values(claimed.spec.txtRecords as Record<string, string>));

  // The job's code: built once, then one execution that prints and ends.
  const job = objects.Job.name;
  const code = await zip({ 'main.py': `print("${names.a} job")\n` });
  await ok(
    await api(`/jobs/${job}/code`, {
      method: 'PUT',
      body: new Uint8Array(code),
      headers: { 'content-type': 'application/zip' },
      ...asA,
    }),
    'job code',
  );
  const deployed = await waitFor(
    api,
    `/jobs/${job}`,
    a.key,
    (j) => j.status === 'DEPLOYED' || j.status === 'FAILED',
    'DEPLOYED',
  );
  assert.equal(deployed.status, 'DEPLOYED', JSON.stringify(deployed.events?.at(-1)));
  values.revisionId = [deployed.activeRevision];
  const exec = await ok(
    await api(`/jobs/${job}/executions`, {
      method: 'POST',
      json: { env: { K: secret('execution') } },
      ...asA,
    }),
    'job execution',
  );
  values.executionId = [exec.executionId];
  values.taskIndex = ['0'];
  markers.push(exec.executionId);
  await waitFor(
    api,
    `/jobs/${job}/executions/${exec.executionId}`,
    a.key,
    (e) => ['succeeded', 'failed', 'cancelled'].includes(e.status),
    'an end',
  );
  const templates = await ok(await api('/templates', asA), 'templates');
  values.templateName = [templates[0].name];
  // The server's own catalogs are the same in every workspace: any name they know will do.
  values.featureKey = ['sandboxes'];
  values.integrationName = ['openai'];
  // A model of A's connection's provider: the provider is not reachable, so the answer is its error.
  values.modelId = ['gpt-4o-mini'];

  // B's own sandbox and private preview, with a token that is B's to hold.
  const asB = { key: b.key };
  await ok(
    await api('/sandboxes', {
      method: 'POST',
      json: {
        metadata: { name: 'bbox' },
        spec: { runtime: { memory: MEMORY_MB }, lifecycle: { terminatedRetention: '0s' } },
      },
      ...asB,
    }),
    "B's sandbox",
  );
  await ok(
    await api('/sandboxes/bbox/previews', {
      method: 'POST',
      json: { metadata: { name: 'bweb' }, spec: { port: 3000, public: false } },
      ...asB,
    }),
    "B's preview",
  );
  const bToken = await ok(
    await api('/sandboxes/bbox/previews/bweb/tokens', {
      method: 'POST',
      json: { spec: { expiresAt: new Date(Date.now() + 86_400_000).toISOString() } },
      ...asB,
    }),
    "B's preview token",
  );

  const robot = await ok(
    await api('/service_accounts', {
      method: 'POST',
      json: { name: `${names.b}-robot`, role: 'admin' },
      ...asB,
    }),
    "B's robot",
  );
  const jwt = await ok(
    await api('/oauth/token', {
      method: 'POST',
      json: {
        grant_type: 'client_credentials',
        client_id: robot.client_id,
        client_secret: robot.client_secret,
      },
      key: null,
    }),
    "B's token",
  );

  return {
    a,
    b,
    bJwt: jwt.access_token,
    c,
    aViewerKey: viewer.key,
    aMemberKey: member.key,
    values,
    labelSelector: `owner=${label}`,
    secrets,
    markers: [...new Set([...markers, ...secrets])],
    objects,
    triggerPath,
    previewPrefix,
    bPreview: { sandbox: 'bbox', name: 'bweb', token: bToken.spec.token },
  };
}
