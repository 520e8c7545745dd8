// Callback targets: loopback, link-local (cloud metadata), private and CGNAT addresses are refused unless the
// server allows them; a public address is not.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Executions, isPrivateAddress } from './executions.js';

describe('callback targets', () => {
  it('private ranges are private, public ones are not', () => {
    for (const ip of [
      '127.0.0.1',
      '169.254.169.254',
      '10.0.0.8',
      '172.16.3.4',
      '192.168.1.1',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      'fd00::1',
      'fe80::1',
      '::ffff:127.0.0.1',
    ])
      assert.equal(isPrivateAddress(ip), true, ip);
    for (const ip of ['8.8.8.8', '172.32.0.1', '2606:4700::1111'])
      assert.equal(isPrivateAddress(ip), false, ip);
  });

  it('refuses a callback URL resolving to loopback, metadata or a private range; allows it when configured', async () => {
    const strict = new Executions({ allowPrivate: false });
    for (const url of [
      'http://127.0.0.1:9/cb',
      'http://169.254.169.254/latest',
      'http://10.0.0.1/x',
      'http://localhost/x',
    ])
      assert.match(String(await strict.refusal(url)), /private|loopback|link-local/, url);
    assert.match(String(await strict.refusal('ftp://example.com/x')), /http or https/);
    assert.equal(await new Executions({ allowPrivate: true }).refusal('http://127.0.0.1:9/cb'), undefined);
  });
});
