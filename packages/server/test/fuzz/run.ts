// The fuzzer as a program, for the benchmark (`npm run bench -- fuzz`): FUZZ_RUNS requests (default 10,000) from
// FUZZ_SEED against a fresh server; prints progress on stderr and the report as one JSON line on stdout.
import { startTestServer } from '../../src/test-support/server.js';
import { FUZZ_SERVER_ENV, fuzzLookup, runFuzz } from './fuzzer.js';

const runs = Number(process.env.FUZZ_RUNS ?? 10_000);
const seed = Number(process.env.FUZZ_SEED ?? Date.now() % 100_000);
const server = await startTestServer(FUZZ_SERVER_ENV, { outboundLookup: fuzzLookup });
try {
  // The baseline: the cheapest authenticated read, sent the same way, one after another.
  const t0 = performance.now();
  const BASELINE = 500;
  for (let i = 0; i < BASELINE; i++) await (await server.api('/quotas')).arrayBuffer();
  const baselineMs = (performance.now() - t0) / BASELINE;
  const started = performance.now();
  const report = await runFuzz({
    server,
    runs,
    seed,
    progress: (n) => process.stderr.write(`fuzz: ${n}/${runs}\n`),
  });
  const msPerRequest = (performance.now() - started) / report.sent;
  process.stdout.write(`${JSON.stringify({ ...report, msPerRequest, baselineMs })}\n`);
} finally {
  await server.close();
}
