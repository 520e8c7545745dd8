// `npm run bench`: every benchmark, each printing its figure beside a same-run baseline and the ratio.
// `npm run bench -- api` runs only the named ones.
import { benchApi } from './api/bench.mjs';
import { benchModels } from './models/bench.mjs';

const all = { api: benchApi, models: benchModels };
const only = process.argv.slice(2);
for (const [name, fn] of Object.entries(all)) {
  if (only.length && !only.includes(name)) continue;
  await fn();
}
