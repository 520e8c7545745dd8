// Every form of inference address the gateway answers, in one place: `classify` is the gateway's own dispatch (the
// order in which a request is matched), and `ADDRESS_FORMS` builds, for each form it can return, the address of
// an object. The record is keyed by the forms `classify` returns, so a new form does not compile until it says
// how to address an object that way, and tests that walk ADDRESS_FORMS (the cross-tenant test) cover it.
import type { IncomingMessage } from 'node:http';
import type { ResourceKey } from '../store/store.js';
import { type JobTriggerAddress, matchJobTrigger } from './job-trigger.js';
import { type Address, type ParseContext, parseAddress } from './parse-address.js';
import {
  matchTriggerPath,
  matchWorkloadHost,
  matchWorkloadPath,
  type WorkloadAddress,
} from './workload-address.js';
import { previewLabel, RUN_PREFIX, sandboxLabel, workloadLabel } from './address.js';

export interface ClassifyContext extends ParseContext {
  /** The address table (store/host-labels.ts). */
  labels: { resolve(label: string): ResourceKey | undefined };
}

export type DataPlaneRoute =
  | {
      form: 'agent-host' | 'function-host' | 'agent-path' | 'function-path' | 'trigger-path';
      workload: WorkloadAddress;
    }
  | { form: 'job-trigger'; job: JobTriggerAddress }
  | { form: 'sandbox-path' | 'sandbox-host' | 'preview-path' | 'preview-host'; address: Address };

export type AddressForm = DataPlaneRoute['form'];

/**
 * The data-plane route of a request, or undefined when it is the API's. Agents and functions first (by host, then
 * path), then jobs' triggers, the sandbox and preview addresses, and last the custom trigger paths, which only
 * take what no other address did.
 */
export function classify(req: IncomingMessage, ctx: ClassifyContext): DataPlaneRoute | undefined {
  const url = req.url ?? '/';
  const host = matchWorkloadHost(req.headers.host, url, ctx.inferenceHost, ctx.labels);
  if (host) return { form: host.kind === 'Agent' ? 'agent-host' : 'function-host', workload: host };
  const path = matchWorkloadPath(url);
  if (path) return { form: path.kind === 'Agent' ? 'agent-path' : 'function-path', workload: path };
  const job = matchJobTrigger(url);
  if (job) return { form: 'job-trigger', job };
  const a = parseAddress(req, ctx);
  if (a?.kind === 'preview')
    return { form: a.preview.base === '/' ? 'preview-host' : 'preview-path', address: a };
  if (a) return { form: a.kind === 'sandbox' ? 'sandbox-path' : 'sandbox-host', address: a };
  const trigger = matchTriggerPath(url, ctx.labels);
  if (trigger) return { form: 'trigger-path', workload: trigger };
  return undefined;
}

/** An object to address: its key (a preview's parent is its sandbox), region, and a trigger's custom path. */
export interface AddressedObject {
  key: ResourceKey;
  region: string;
  /** An `http` trigger's `configuration.path` (trigger-path form only). */
  triggerPath?: string;
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
