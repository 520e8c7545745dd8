// `berth serve` and an error no code path handled (decision 095): logged at fatal through the server's logger, with
// the error and its kind, then the process exits with 70, for a rejection and for a thrown exception alike.
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import { exitOnLostErrors, LOST_ERROR_EXIT } from './lost-errors.js';

type Logger = Parameters<typeof exitOnLostErrors>[0];

describe('an error no code path handled ends `berth serve`', () => {
  for (const [event, kind] of [
    ['unhandledRejection', 'unhandled rejection'],
    ['uncaughtException', 'uncaught exception'],
  ] as const)
    it(`${kind}: logged at fatal with the error and flushed, then exit ${LOST_ERROR_EXIT}`, () => {
      // The server's logger as far as this uses it: what reached `fatal`, and whether it was flushed before the exit.
      const said: Array<{ obj: any; msg: string; flushed: boolean }> = [];
      let flushed = false;
      const logger = {
        fatal: (obj: any, msg: string) => said.push({ obj, msg, flushed }),
        flush: () => {
          flushed = true;
        },
      } as unknown as Logger;
      const proc = new EventEmitter();
      const exits: Array<{ code: number; flushed: boolean }> = [];
      exitOnLostErrors(logger, proc, (code) => exits.push({ code, flushed }));
      const err = new Error('a lease was never given back');
      proc.emit(event, err);
      assert.deepEqual(exits, [{ code: LOST_ERROR_EXIT, flushed: true }], 'exits once, after the flush');
      assert.equal(said.length, 1);
      assert.equal(said[0].obj.err, err, 'the error itself, for the logger to serialise and redact');
      assert.equal(said[0].obj.kind, kind);
      assert.match(said[0].msg, /no code path handled/);
    });
});
