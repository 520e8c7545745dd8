// VPC, egress gateway and egress IP (§2.12): network isolation and dedicated outbound addresses.
// A VPC with gateways, or a gateway with IPs, cannot be deleted (409) until its children are gone.
import { Type } from './typebox.js';
import { literals, opt } from './common.js';
import { regionIssues } from './rules.js';
import type { KindDescriptor } from './types.js';

export const IP_FAMILIES = ['IPv4'] as const;

export const vpc = {
  kind: 'Vpc',
  plural: 'vpcs',
  aliases: ['vpc'],
  path: '/vpcs',
  nameParam: 'vpcName',
  description: 'Network isolation boundary holding egress gateways.',
  spec: Type.Object({}),
  hasStatus: true,
} satisfies KindDescriptor;

export const egressGateway = {
  kind: 'EgressGateway',
  plural: 'egressgateways',
  aliases: ['egressgateway', 'gateways', 'gateway', 'egw'],
  path: '/vpcs/{vpcName}/egressgateways',
  nameParam: 'gatewayName',
  parents: [{ param: 'vpcName', kind: 'Vpc', metadataField: 'vpcName' }],
  everyParentPath: '/egressgateways',
  description: 'Outbound routing inside a VPC; egress IPs are allocated from it.',
  spec: Type.Object({ region: opt(Type.String()) }),
  metadataExtra: { vpcName: Type.String() },
  hasStatus: true,
  immutable: ['/region'],
  defaults(spec, { regions }) {
    spec.region ??= regions[0];
  },
  validate(next, _prev, ctx) {
    return regionIssues(next.spec.region, ctx);
  },
} satisfies KindDescriptor;

export const egressIp = {
  kind: 'EgressIp',
  plural: 'egressips',
  aliases: ['egressip', 'ips', 'ip'],
  path: '/vpcs/{vpcName}/egressgateways/{gatewayName}/ips',
  nameParam: 'ipName',
  parents: [
    { param: 'vpcName', kind: 'Vpc', metadataField: 'vpcName' },
    { param: 'gatewayName', kind: 'EgressGateway', metadataField: 'gatewayName' },
  ],
  everyParentPath: '/egressips',
  description: 'A dedicated outbound address allocated from an egress gateway.',
  spec: Type.Object({
    ipFamily: opt(literals(IP_FAMILIES)),
    /** The provisioned address, written by the egress controller (response only). */
    publicIp: opt(Type.String()),
  }),
  metadataExtra: { vpcName: Type.String(), gatewayName: Type.String() },
  readOnlySpec: ['/publicIp'],
  hasStatus: true,
  immutable: ['/ipFamily'],
  defaults(spec) {
    spec.ipFamily ??= 'IPv4';
  },
} satisfies KindDescriptor;
