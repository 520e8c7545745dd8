// Each address form's own example is parsed by the gateway's one parse as that form, to that object: the table that
// tests walk and the dispatch the gateway runs cannot drift apart.
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { test } from 'node:test';
import { pathLabel, previewLabel, sandboxLabel, workloadLabel } from './address.js';
import { ADDRESS_FORMS, type AddressForm, formOf } from './address-forms.js';
import { parseAddress } from './parse-address.js';
import { PreviewHosts } from './previews.js';

const INFERENCE_HOST = 'example.com';
const WS = 'team';
const OBJECTS: Record<string, { name: string; parent: string }> = {
  Agent: { name: 'helper', parent: '' },
  Function: { name: 'tools', parent: '' },
  Application: { name: 'site', parent: '' },
  Job: { name: 'nightly', parent: '' },
  Sandbox: { name: 'box', parent: '' },
  Preview: { name: 'web', parent: 'box' },
};
const TRIGGER_PATH = 'hooks/in';
const PREFIX_URL = 'my-prefix';

const table = new Map([
  [workloadLabel('Agent', WS, 'helper'), { kind: 'Agent', workspace: WS, parent: '', name: 'helper' }],
  [workloadLabel('Function', WS, 'tools'), { kind: 'Function', workspace: WS, parent: '', name: 'tools' }],
  [
    workloadLabel('Application', WS, 'site'),
    { kind: 'Application', workspace: WS, parent: '', name: 'site' },
  ],
  [sandboxLabel(WS, 'box'), { kind: 'Sandbox', workspace: WS, parent: '', name: 'box' }],
  [previewLabel(WS, 'box', 'web'), { kind: 'Preview', workspace: WS, parent: 'box', name: 'web' }],
  [pathLabel(WS, TRIGGER_PATH), { kind: 'Agent', workspace: WS, parent: '', name: 'helper' }],
  [pathLabel(WS, PREFIX_URL), { kind: 'Preview', workspace: WS, parent: 'box', name: 'web' }],
]);
const labels = { resolve: (l: string) => table.get(l) };
const previews = new PreviewHosts(labels as never, INFERENCE_HOST);
const ctx = {
  inferenceHost: INFERENCE_HOST,
  labels,
  previewOfHost: (host: string | undefined, url: string) => previews.match(host, url),
};

test('every address form of the table is dispatched as that form, to its object', () => {
  for (const [form, spec] of Object.entries(ADDRESS_FORMS) as [
    AddressForm,
    (typeof ADDRESS_FORMS)[AddressForm],
  ][]) {
    const o = OBJECTS[spec.kind];
    const key = { kind: spec.kind, workspace: WS, parent: o.parent, name: o.name };
    const r = spec.request(
      { key, region: 'local', triggerPath: TRIGGER_PATH, prefixUrl: PREFIX_URL },
      INFERENCE_HOST,
    );
    assert.equal(!!r.host, spec.byHost, `${form}: a host form says so`);
    const req = { url: r.path, headers: { host: r.host ?? '127.0.0.1:8080' } } as unknown as IncomingMessage;
    const a = parseAddress(req, ctx);
    assert.equal(a && formOf(a), form, `${form}: ${r.host ?? ''}${r.path}`);
    const target =
      a?.kind === 'workload'
        ? a.workload
        : a?.kind === 'job-trigger'
          ? a.job
          : a?.kind === 'preview'
            ? { workspace: a.preview.workspace, name: a.preview.preview }
            : a?.kind === 'sandbox'
              ? a
              : { workspace: WS, name: a && labels.resolve(a.label)?.name };
    assert.deepEqual(
      { workspace: target.workspace, name: target.name },
      { workspace: WS, name: o.name },
      form,
    );
  }
});

test('a request to the API is no data-plane form', () => {
  const req = { url: '/v0/sandboxes', headers: { host: '127.0.0.1:8080' } } as unknown as IncomingMessage;
  assert.equal(parseAddress(req, ctx), undefined);
});
