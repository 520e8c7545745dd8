// Signs a trigger callback (DESIGN.md §4): Standard Webhooks (`webhook-id`, `webhook-timestamp`,
// `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, keyed by the base64 part of the `whsec_`
// secret) and, for receivers using the service's SDK (`verifyWebhookSignature`), `X-Blaxel-Signature:
// sha256=<hex HMAC-SHA256 of the body keyed by the whole secret string>` with `X-Blaxel-Timestamp`. The second
// signs the body only (the SDK's scheme): receivers that can should verify the first, which covers id and time.
import { createHmac } from 'node:crypto';

export const WEBHOOK_SECRET_PREFIX = 'whsec_';

export function webhookHeaders(
  secret: string,
  id: string,
  timestampS: number,
  body: string,
): Record<string, string> {
  const key = Buffer.from(
    secret.startsWith(WEBHOOK_SECRET_PREFIX) ? secret.slice(WEBHOOK_SECRET_PREFIX.length) : secret,
    'base64',
  );
  const v1 = createHmac('sha256', key).update(`${id}.${timestampS}.${body}`).digest('base64');
  const sdk = createHmac('sha256', secret).update(body).digest('hex');
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampS),
    'webhook-signature': `v1,${v1}`,
    'x-blaxel-signature': `sha256=${sdk}`,
    'x-blaxel-timestamp': String(timestampS),
  };
}
