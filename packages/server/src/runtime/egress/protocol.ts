// Messages between the server (supervisor.ts) and the egress child process (child.ts), over the fork IPC channel.
import type { EgressPorts } from '../linux/egress-ports.js';
import type { CaMaterial } from './ca.js';
import type { InterceptAudit } from './intercept.js';
import type { AuditLine } from './proxy.js';
import type { DnsDecision } from './dns-server.js';
import type { EgressPolicy } from './policy.js';

export type { EgressPorts };

export interface ChildConfig {
  ports: EgressPorts;
  resolvers?: string[];
  allowCidrs?: string[];
  /** PEM file of extra CAs trusted for upstream certificates of intercepted requests (tests' own upstreams). */
  upstreamCaFile?: string;
}

export type ToChild =
  /** `seq`: answered with `applied` once the child holds the policy (the server waits for it before traffic). */
  | { type: 'policy'; source: string; policy: EgressPolicy; ca?: CaMaterial; seq?: number }
  | { type: 'forget'; source: string };

/** What the child reports about traffic: one line per connection, intercepted request and DNS answer. */
export type TrafficEvent =
  | { type: 'audit'; line: AuditLine }
  | { type: 'request'; request: InterceptAudit }
  | { type: 'dns'; decision: DnsDecision };

export type FromChild =
  | { type: 'ready' }
  | { type: 'applied'; seq: number }
  | { type: 'failed'; message: string }
  /** Traffic events of up to 20 ms (traffic.ts), in order: one IPC write for all of them. */
  | { type: 'traffic'; events: TrafficEvent[] };
