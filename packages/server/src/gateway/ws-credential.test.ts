// The console's terminal sends its key as a WebSocket subprotocol: it becomes the request's Authorization, and
// leaves both the parsed headers and the raw head the tunnel writes to the sandbox.
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { liftWsCredential, WS_BEARER_PROTOCOL_PREFIX } from './ws-credential.js';

function request(headers: [string, string][]): IncomingMessage {
  return {
    headers: Object.fromEntries(headers.map(([k, v]) => [k.toLowerCase(), v])),
    rawHeaders: headers.flat(),
  } as unknown as IncomingMessage;
}

const KEY = 'bk_secret-key/with+chars=';
const b64 = Buffer.from(KEY).toString('base64url');

describe('the WebSocket credential subprotocol', () => {
  it('moves the key into Authorization and out of every header the sandbox sees', () => {
    const req = request([
      ['Host', 'x'],
      ['Sec-WebSocket-Protocol', `berth.terminal, ${WS_BEARER_PROTOCOL_PREFIX}${b64}`],
    ]);
    liftWsCredential(req);
    assert.equal(req.headers.authorization, `Bearer ${KEY}`);
    assert.equal(req.headers['sec-websocket-protocol'], 'berth.terminal');
    assert.deepEqual(req.rawHeaders, ['Host', 'x', 'Sec-WebSocket-Protocol', 'berth.terminal']);
    assert.ok(!JSON.stringify(req.rawHeaders).includes(b64));
  });

  it('never overrides an Authorization sent as a header, and still drops the protocol', () => {
    const req = request([
      ['Authorization', 'Bearer other'],
      ['Sec-WebSocket-Protocol', `${WS_BEARER_PROTOCOL_PREFIX}${b64}`],
    ]);
    liftWsCredential(req);
    assert.equal(req.headers.authorization, 'Bearer other');
    assert.equal(req.headers['sec-websocket-protocol'], undefined);
    assert.deepEqual(req.rawHeaders, ['Authorization', 'Bearer other']);
  });

  it('leaves a request without the credential protocol as it was', () => {
    const req = request([['Sec-WebSocket-Protocol', 'graphql-ws']]);
    liftWsCredential(req);
    assert.equal(req.headers.authorization, undefined);
    assert.deepEqual(req.rawHeaders, ['Sec-WebSocket-Protocol', 'graphql-ws']);
  });
});
