// Paths pino censors in every log line: credentials in headers and secret-bearing bodies.
export const LOG_REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["x-service-authorization"]',
  'req.headers["x-blaxel-authorization"]',
  'req.headers["x-service-preview-token"]',
  'req.headers["x-blaxel-preview-token"]',
  'req.headers.cookie',
  'headers.authorization',
  'body.spec.secret',
  'body.client_secret',
  'body.apiKey',
  'apiKey',
  'client_secret',
  'access_token',
];

/**
 * A request URL as logs and problem answers show it: bearer capabilities a URL may carry (a preview token's value
 * in a path or in `bl_preview_token`, an upload URL's token) replaced, the rest kept for debugging.
 */
export function redactUrl(url: string): string {
  return url
    .replace(/\/bpt_[^/?#]*/g, '/bpt_[redacted]')
    .replace(/([?&]bl_preview_token=)[^&#]*/g, '$1[redacted]')
    .replace(/^\/uploads\/[^/?#]+/, '/uploads/[redacted]');
}

/** Fastify's request serializer (the same fields), with the URL redacted. */
export function logRequest(req: {
  method?: string;
  url?: string;
  headers?: Record<string, unknown>;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}) {
  return {
    method: req.method,
    url: req.url === undefined ? undefined : redactUrl(req.url),
    version: req.headers?.['accept-version'],
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}
