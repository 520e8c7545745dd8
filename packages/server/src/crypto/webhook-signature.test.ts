// Callback signatures verify with the Standard Webhooks library and with the service SDK's verifyWebhookSignature;
// a changed body, a changed timestamp or a stale one fails.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { verifyWebhookSignature } from '@blaxel/core';
import { Webhook } from 'standardwebhooks';
import { webhookHeaders } from './webhook-signature.js';

const secret = `whsec_${randomBytes(24).toString('base64')}`;
const body = JSON.stringify({
  type: 'execution.completed',
  data: { executionId: 'e1', status: 'completed' },
});
const now = () => Math.floor(Date.now() / 1000);

describe('webhook signatures', () => {
  it('verify with standardwebhooks', () => {
    const h = webhookHeaders(secret, 'msg_1', now(), body);
    assert.deepEqual(new Webhook(secret).verify(body, h), JSON.parse(body));
  });

  it('a mutated body, a mutated timestamp and a timestamp older than 5 minutes fail', () => {
    const h = webhookHeaders(secret, 'msg_1', now(), body);
    const wh = new Webhook(secret);
    assert.throws(() => wh.verify(body.replace('completed', 'failed'), h));
    assert.throws(() => wh.verify(body, { ...h, 'webhook-timestamp': String(now() - 1) }));
    const old = now() - 301;
    assert.throws(() => wh.verify(body, webhookHeaders(secret, 'msg_1', old, body)));
  });

  it("verify with the service SDK's verifyWebhookSignature, and fail on a changed body", () => {
    const h = webhookHeaders(secret, 'msg_1', now(), body);
    const ok = verifyWebhookSignature({
      body,
      secret,
      signature: h['x-blaxel-signature'],
      timestamp: h['x-blaxel-timestamp'],
    });
    assert.equal(ok, true);
    const bad = verifyWebhookSignature({
      body: `${body} `,
      secret,
      signature: h['x-blaxel-signature'],
      timestamp: h['x-blaxel-timestamp'],
    });
    assert.equal(bad, false);
  });
});
