// The kinds registry: every resource kind of the specification as a descriptor.
import { agent } from './agent.js';
import { application } from './application.js';
import { drive } from './drive.js';
import { fn } from './function.js';
import { integrationConnection } from './integration-connection.js';
import { job } from './job.js';
import { model } from './model.js';
import { policy } from './policy.js';
import { preview } from './preview.js';
import { sandbox } from './sandbox.js';
import type { KindDescriptor } from './types.js';
import { volume } from './volume.js';
import { volumeTemplate } from './volume-template.js';
import { egressGateway, egressIp, vpc } from './vpc.js';

/** Parents come before their children, and referenced kinds before the kinds that name them (apply order). */
export const KINDS: KindDescriptor[] = [
  policy,
  integrationConnection,
  volumeTemplate,
  volume,
  drive,
  model,
  agent,
  fn,
  job,
  sandbox,
  application,
  preview,
  vpc,
  egressGateway,
  egressIp,
];

export function kindByName(name: string): KindDescriptor | undefined {
  const n = name.toLowerCase();
  return KINDS.find((k) => k.kind.toLowerCase() === n || k.plural === n || k.aliases?.includes(n));
}
