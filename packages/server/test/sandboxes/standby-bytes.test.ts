// Byte-exact standby, the short run (`npm run bench -- standby-cycles` runs 1,000 cycles): a process appending
// fsync'd records to a volume and counting them in memory, through standby and wake-up cycles with requests sent as
// the sandbox freezes and as it thaws, and `berth serve` killed with SIGKILL and started again: no byte of the
// records lost, no process lost, no first call after a wake-up failed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runStandbyCycles } from './standby-cycles.js';

const CYCLES = Number(process.env.STANDBY_CYCLES ?? 40);
const KILL_EVERY = Number(process.env.STANDBY_KILL_EVERY ?? 20);

test(`${CYCLES} standby cycles, the server killed every ${KILL_EVERY}: no byte, process or first call lost`, async () => {
  const r = await runStandbyCycles({ cycles: CYCLES, killEvery: KILL_EVERY, verifyEvery: 10 });
  console.log(`standby cycles: ${JSON.stringify({ ...r, problems: r.problems.length })}`);
  assert.deepEqual(r.problems, []);
  assert.equal(r.cycles, CYCLES);
  assert.equal(r.serverKills, Math.floor((CYCLES - 1) / KILL_EVERY));
  assert.ok(r.bytesCompared > 0);
  assert.deepEqual([r.firstCallFailures, r.otherFailures, r.lostBytes, r.lostProcesses], [0, 0, 0, 0]);
});
