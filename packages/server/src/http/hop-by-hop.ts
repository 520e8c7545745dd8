// Headers that describe one connection, not the message (RFC 9110 §7.6.1): no proxy passes them on, either way.
// The in-sandbox daemon keeps its own copy (sandbox-api/ is a program of its own, built into one file).
export const HOP_BY_HOP: readonly string[] = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
];
