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
