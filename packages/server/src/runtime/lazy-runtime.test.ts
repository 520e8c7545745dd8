// What the server says when it opens the sandbox runtime: a host where deep standby cannot work says so, with why.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import pino from 'pino';
import { FakeDriver } from './fake.js';
import { LazyRuntime } from './lazy-runtime.js';

function logged() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  return { lines, logger: pino({ level: 'info' }, stream) };
}

test('opening a runtime without deep standby logs a warning naming the reason', async () => {
  const { lines, logger } = logged();
  const driver = new FakeDriver();
  Object.assign(driver.capabilities, { deepStandby: false, deepStandbyReason: 'the host has no swap' });
  await new LazyRuntime('/nonexistent', logger, async () => driver).ready();
  const warning = lines.find(
    (l) => l.msg === 'sandbox deep standby is off: sandboxes in standby keep their memory',
  );
  assert.ok(warning, JSON.stringify(lines));
  assert.equal(warning.reason, 'the host has no swap');
});

test('a runtime with deep standby on says nothing about it', async () => {
  const { lines, logger } = logged();
  const driver = new FakeDriver();
  Object.assign(driver.capabilities, { deepStandby: true });
  await new LazyRuntime('/nonexistent', logger, async () => driver).ready();
  assert.equal(lines.filter((l) => String(l.msg).includes('deep standby')).length, 0);
});
