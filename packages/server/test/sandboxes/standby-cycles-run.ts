// The standby cycles as a program, for `npm run bench -- standby-cycles`: STANDBY_CYCLES (default 1,000), the server
// killed every STANDBY_KILL_EVERY (default 100); progress on stderr, the report as one JSON line on stdout.
import { runStandbyCycles } from './standby-cycles.js';

const cycles = Number(process.env.STANDBY_CYCLES ?? 1000);
const killEvery = Number(process.env.STANDBY_KILL_EVERY ?? 100);
const started = performance.now();
const r = await runStandbyCycles({
  cycles,
  killEvery,
  progress: (c) => c % 100 === 0 && process.stderr.write(`standby cycles: ${c}/${cycles}\n`),
});
process.stdout.write(`${JSON.stringify({ ...r, seconds: (performance.now() - started) / 1000 })}\n`);
