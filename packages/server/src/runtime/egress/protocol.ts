// Messages between the server (supervisor.ts) and the egress child process (child.ts), over the fork IPC channel.
import type { CaMaterial } from './ca.js';
import type { InterceptAudit } from './intercept.js';
import type { AuditLine } from './proxy.js';
import type { DnsDecision } from './dns-server.js';
import type { EgressPolicy } from './policy.js';

export interface EgressPorts {
  /** HTTP_PROXY / HTTPS_PROXY inside sandboxes (CONNECT and absolute-form). */
  explicit: number;
  /** Where sandbox TCP to port 443 is redirected. */
  tls: number;
  /** Where sandbox TCP to port 80 is redirected. */
  http: number;
  /** Where sandbox UDP and TCP to port 53 is redirected. */
  dns: number;
}

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

export type FromChild =
  | { type: 'ready' }
  | { type: 'applied'; seq: number }
  | { type: 'failed'; message: string }
  | { type: 'audit'; line: AuditLine }
  | { type: 'request'; request: InterceptAudit }
  | { type: 'dns'; decision: DnsDecision };
