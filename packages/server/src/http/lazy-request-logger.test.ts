import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import { pino } from 'pino';
import { lazyChildLogger } from './lazy-request-logger.js';

test("a request's logger becomes pino's child only when used, and logs with the request's bindings", async () => {
  const out = new PassThrough();
  const lines: string[] = [];
  out.on('data', (d: Buffer) => lines.push(...d.toString().trim().split('\n')));
  const parent = pino({ level: 'info' }, out) as unknown as FastifyBaseLogger;
  let children = 0;
  const child = parent.child.bind(parent);
  parent.child = ((b: any, o: any) => {
    children++;
    return child(b, o);
  }) as FastifyBaseLogger['child'];
  const quiet = lazyChildLogger(parent, { reqId: 'req-1' }, {});
  assert.equal(children, 0, 'an unused request logger makes no child');
  const used = lazyChildLogger(parent, { reqId: 'req-2' }, {});
  used.error({ err: new Error('boom') }, 'failed');
  used.debug('below the level');
  used.warn('twice');
  assert.equal(children, 1, 'made once, on first use');
  assert.equal(used.level, 'info');
  assert.equal(quiet.child({ x: 1 }).level, 'info');
  await new Promise((r) => setImmediate(r));
  const logged = lines.map((l) => JSON.parse(l));
  assert.deepEqual(
    logged.map((l) => [l.reqId, l.level, l.msg]),
    [
      ['req-2', 50, 'failed'],
      ['req-2', 40, 'twice'],
    ],
  );
  assert.equal(logged[0].err.message, 'boom');
});
