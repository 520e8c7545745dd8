// deploy/: the node image's Dockerfile and the Kubernetes manifest docs/cluster.md points to. No Kubernetes runs
// here, so this checks what can be checked without one: that both parse, that every Berth setting the manifest
// sets is one `berth serve` reads, and that the pieces agree with each other (the Service reaches the pods' port,
// the probe asks the server's health route, the data dir the server is given is the node's own disk, the peer
// address is the pod's and the port it listens on).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { parseDockerfile } from '../../src/builds/dockerfile/parse.js';

const REPO = join(import.meta.dirname, '../../../..');
const read = (p: string) => readFileSync(join(REPO, p), 'utf8');

/** Every BERTH_ setting the server's config reads. */
const SETTINGS = new Set(read('packages/server/src/config.ts').match(/BERTH_[A-Z0-9_]+/g));

const docs = parseAllDocuments(read('deploy/kubernetes/berth.yaml')).map((d) => {
  assert.deepEqual(d.errors, [], 'the manifest is YAML');
  return d.toJS();
});
const one = (kind: string) => {
  const found = docs.filter((d) => d.kind === kind);
  assert.equal(found.length, 1, `one ${kind}`);
  return found[0];
};

test('the DaemonSet runs `berth serve` privileged, on the node’s own disk, with settings the server reads', () => {
  const ds = one('DaemonSet');
  assert.equal(ds.apiVersion, 'apps/v1');
  assert.deepEqual(ds.spec.selector.matchLabels, ds.spec.template.metadata.labels);
  const pod = ds.spec.template.spec;
  assert.equal(pod.containers.length, 1);
  const c = pod.containers[0];
  assert.equal(c.securityContext.privileged, true, 'sandboxes need a privileged container');
  assert.equal(c.args[0], 'serve');
  const flag = (name: string) => c.args[c.args.indexOf(name) + 1];
  assert.equal(flag('--host'), '0.0.0.0');
  const port = Number(flag('--port'));
  assert.deepEqual(
    c.ports.map((p: any) => p.containerPort),
    [port],
  );
  const data = c.volumeMounts.find((m: any) => m.mountPath === flag('--data-dir'));
  assert.ok(data, 'the data dir is a mounted volume');
  assert.ok(pod.volumes.find((v: any) => v.name === data.name).hostPath, 'on the node’s disk');
  assert.equal(c.livenessProbe, undefined, 'no liveness probe: a restart ends the node’s sandboxes');
  assert.equal(c.readinessProbe.httpGet.path, '/healthz');

  const env = new Map<string, any>(c.env.map((e: any) => [e.name, e]));
  for (const name of env.keys())
    if (name.startsWith('BERTH_')) assert.ok(SETTINGS.has(name), `${name} is a setting of berth serve`);
  for (const needed of [
    'BERTH_DATABASE_URL',
    'BERTH_MASTER_KEY',
    'BERTH_PUBLIC_URL',
    'BERTH_NODE_ID',
    'BERTH_PEER_URL',
  ])
    assert.ok(env.has(needed), `${needed} is set`);
  assert.equal(env.get('BERTH_NODE_ID').valueFrom.fieldRef.fieldPath, 'spec.nodeName');
  assert.equal(env.get('POD_IP').valueFrom.fieldRef.fieldPath, 'status.podIP');
  assert.equal(env.get('BERTH_PEER_URL').value, `http://$(POD_IP):${port}`);
  // A variable is expanded only when it is defined above the one naming it.
  assert.ok([...env.keys()].indexOf('POD_IP') < [...env.keys()].indexOf('BERTH_PEER_URL'));
  for (const secret of ['BERTH_DATABASE_URL', 'BERTH_MASTER_KEY'])
    assert.equal(env.get(secret).value, undefined, `${secret} comes from a Secret, not the manifest`);
});

test('the Service reaches the DaemonSet’s pods on the port the server listens on', () => {
  const ds = one('DaemonSet');
  const svc = one('Service');
  assert.equal(svc.metadata.namespace, ds.metadata.namespace);
  assert.deepEqual(svc.spec.selector, ds.spec.template.metadata.labels);
  const named = ds.spec.template.spec.containers[0].ports.map((p: any) => p.name);
  for (const p of svc.spec.ports)
    assert.ok(named.includes(p.targetPort), `targetPort ${p.targetPort} names a port`);
});

test('the image is built by the README’s install script and runs `berth` under an init that reaps', () => {
  const df = parseDockerfile(read('deploy/Dockerfile'));
  assert.equal(df.stages.length, 1);
  const steps = df.stages[0].steps;
  const run = steps.filter((s) => s.kind === 'RUN').map((s) => s.text);
  assert.ok(run.some((t) => t.includes('bash scripts/install.sh')));
  assert.ok(run.some((t) => t.includes('tini')));
  const entry = steps.find((s) => s.kind === 'ENTRYPOINT');
  assert.ok(entry && entry.kind === 'ENTRYPOINT' && 'exec' in entry.command);
  assert.deepEqual(entry.command.exec, ['/usr/bin/tini', '--', 'berth']);
  const cmd = steps.find((s) => s.kind === 'CMD');
  assert.ok(cmd && cmd.kind === 'CMD' && 'exec' in cmd.command);
  assert.equal(cmd.command.exec[0], 'serve');
  // What the context leaves out: node_modules built for the host's Node would shadow the image's own.
  assert.match(read('.dockerignore'), /^node_modules$/m);
});
