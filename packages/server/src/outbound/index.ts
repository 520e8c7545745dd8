// Outbound requests: the one address policy and the one client (undici connector, fetch, write-time URL check)
// behind every request Berth sends outward for a user. Sandboxes' egress reads the same reserved ranges.
export { AddressPolicy, type AddressPolicyOptions, closedReason, type Verdict } from './address-policy.js';
export {
  type Lookup,
  Outbound,
  type OutboundOptions,
  OUTBOUND_SETTING,
  OutboundRefused,
} from './outbound.js';
export { EMBEDS_V4, RESERVED_V4, RESERVED_V6, type ReservedRange } from './reserved-ranges.js';
