// The API fuzzer, seeded (FUZZ_SEED, FUZZ_RUNS to vary it): requests for every operation of GET /v0/openapi.json,
// valid, at the bounds, invalid, with odd headers and tricky path parameters. No answer is a server error, every
// 4xx is a problem, every answer is what the document says for its status, and a refused write changes nothing.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestServer, type TestServer } from '../../src/test-support/server.js';
import { FUZZ_SERVER_ENV, fuzzLookup, runFuzz } from './fuzzer.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 300);
const SEED = Number(process.env.FUZZ_SEED ?? 29);

let server: TestServer;
before(async () => {
  server = await startTestServer(FUZZ_SERVER_ENV, { outboundLookup: fuzzLookup });
});
after(() => server?.close());

test(`${RUNS} fuzzed requests over every operation: no 5xx, problems for 4xx, answers as documented, refusals change nothing`, async () => {
  const r = await runFuzz({ server, runs: RUNS, seed: SEED });
  console.log(
    `fuzz: seed ${r.seed}, ${r.sent} requests, statuses ${JSON.stringify(r.byStatus)}, ${r.refusedWritesChecked} refused writes compared, ${r.serverErrors} 5xx`,
  );
  assert.equal(r.sent, RUNS);
  assert.deepEqual(
    r.failures,
    [],
    `${r.failures.length} failures (seed ${r.seed}):\n${r.failures.join('\n')}`,
  );
});
