// Every form of inference address the gateway answers, in one place: `formOf` names the form of an address the
// gateway's one parse returned (parse-address.ts), and `ADDRESS_FORMS` builds, for each form, the address of an
// object. The record is keyed by the forms `formOf` returns, so a new form does not compile until it says how to
// address an object that way, and tests that walk ADDRESS_FORMS (the cross-tenant test) cover it.
import type { ResourceKey } from '../store/store.js';
import { previewLabel, RUN_PREFIX, sandboxLabel, workloadLabel } from './address.js';
import type { Address } from './parse-address.js';

export type AddressForm =
  | 'agent-host'
  | 'function-host'
  | 'agent-path'
  | 'function-path'
  | 'application-host'
  | 'application-path'
  | 'trigger-path'
  | 'job-trigger'
  | 'sandbox-path'
  | 'sandbox-host'
  | 'preview-path'
  | 'preview-prefix-path'
  | 'preview-host';

const WORKLOAD_FORM = { Agent: 'agent', Function: 'function', Application: 'application' } as const;

/** The form of a parsed address (parse-address.ts): how the request named its object. */
export function formOf(a: Address): AddressForm {
  switch (a.kind) {
    case 'workload':
      if (a.by === 'trigger-path') return 'trigger-path';
      return `${WORKLOAD_FORM[a.workload.kind]}-${a.by}`;
    case 'job-trigger':
      return 'job-trigger';
    case 'sandbox':
      return 'sandbox-path';
    case 'sandbox-host':
      return 'sandbox-host';
    case 'preview':
      if (a.preview.prefixed) return 'preview-prefix-path';
      return a.preview.base === '/' ? 'preview-host' : 'preview-path';
  }
}

/** An object to address: its key (a preview's parent is its sandbox), region, and a trigger's custom path. */
export interface AddressedObject {
  key: ResourceKey;
  region: string;
  /** An `http` trigger's `configuration.path` (trigger-path form only). */
  triggerPath?: string;
  /** A preview's `spec.prefixUrl` (preview-prefix-path form only). */
  prefixUrl?: string;
}

/** A request line to an address: the path (under the server's own origin) and the Host to send, when not its own. */
export interface AddressRequest {
  method: string;
  path: string;
  host?: string;
}

export interface AddressFormSpec {
  /** The kind of object addressed this way. */
  kind: string;
  /** Needs an inference host (`BERTH_INFERENCE_HOST`) to exist. */
  byHost: boolean;
  request(o: AddressedObject, inferenceHost: string): AddressRequest;
}

const onHost = (label: string, o: AddressedObject, inferenceHost: string) =>
  `${label}.${o.region}.${inferenceHost}`;
const run = (o: AddressedObject, rest: string) => `${RUN_PREFIX}${o.key.workspace}/${rest}`;

export const ADDRESS_FORMS: Record<AddressForm, AddressFormSpec> = {
  'agent-host': {
    kind: 'Agent',
    byHost: true,
    request: (o, ih) => ({
      method: 'POST',
      path: '/',
      host: onHost(workloadLabel('Agent', o.key.workspace, o.key.name), o, ih),
    }),
  },
  'function-host': {
    kind: 'Function',
    byHost: true,
    request: (o, ih) => ({
      method: 'POST',
      path: '/mcp',
      host: onHost(workloadLabel('Function', o.key.workspace, o.key.name), o, ih),
    }),
  },
  'agent-path': {
    kind: 'Agent',
    byHost: false,
    request: (o) => ({ method: 'POST', path: run(o, `agents/${o.key.name}`) }),
  },
  'function-path': {
    kind: 'Function',
    byHost: false,
    request: (o) => ({ method: 'POST', path: run(o, `functions/${o.key.name}/mcp`) }),
  },
  'application-host': {
    kind: 'Application',
    byHost: true,
    request: (o, ih) => ({
      method: 'GET',
      path: '/',
      host: onHost(workloadLabel('Application', o.key.workspace, o.key.name), o, ih),
    }),
  },
  'application-path': {
    kind: 'Application',
    byHost: false,
    request: (o) => ({ method: 'GET', path: run(o, `applications/${o.key.name}/`) }),
  },
  'trigger-path': {
    kind: 'Agent',
    byHost: false,
    request: (o) => ({ method: 'POST', path: run(o, o.triggerPath ?? '') }),
  },
  'job-trigger': {
    kind: 'Job',
    byHost: false,
    request: (o) => ({ method: 'POST', path: run(o, `jobs/${o.key.name}`) }),
  },
  'sandbox-path': {
    kind: 'Sandbox',
    byHost: false,
    request: (o) => ({ method: 'GET', path: run(o, `sandboxes/${o.key.name}/process`) }),
  },
  'sandbox-host': {
    kind: 'Sandbox',
    byHost: true,
    request: (o, ih) => ({
      method: 'GET',
      path: '/process',
      host: onHost(sandboxLabel(o.key.workspace, o.key.name), o, ih),
    }),
  },
  'preview-path': {
    kind: 'Preview',
    byHost: false,
    request: (o) => ({ method: 'GET', path: run(o, `previews/${o.key.parent}/${o.key.name}/`) }),
  },
  'preview-prefix-path': {
    kind: 'Preview',
    byHost: false,
    request: (o) => ({ method: 'GET', path: run(o, `${o.prefixUrl ?? ''}/`) }),
  },
  'preview-host': {
    kind: 'Preview',
    byHost: true,
    request: (o, ih) => ({
      method: 'GET',
      path: '/',
      host: onHost(previewLabel(o.key.workspace, o.key.parent, o.key.name), o, ih),
    }),
  },
};
