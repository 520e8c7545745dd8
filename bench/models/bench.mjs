// bench/models: the same chat request sent straight to a fake provider (a child process) and through the
// Berth model gateway, in one run. Prints what the gateway adds: latency p50/p99, throughput, and
// time-to-first-token for streamed answers.
import { createRequire } from 'node:module';
import { startBerth, startScript } from '../lib/berth.mjs';
import { header, row } from '../lib/report.mjs';

const require = createRequire(import.meta.url);
const autocannon = require('autocannon');
const DURATION_S = Number(process.env.BENCH_DURATION ?? 5);
const CONNECTIONS = 32;
/** Sequential streamed calls per path for time-to-first-token percentiles. */
const TTFT_SAMPLES = 300;
const FAKE = new URL('../../packages/server/src/test-support/fake-provider.ts', import.meta.url).pathname;
const CHAT = { model: 'fake-gpt', messages: [{ role: 'user', content: 'Say hello' }], max_tokens: 16 };

const run = (opts) =>
  new Promise((resolve, reject) =>
    autocannon({ connections: CONNECTIONS, duration: DURATION_S, method: 'POST', ...opts }, (err, res) =>
      err ? reject(err) : resolve(res),
    ),
  );

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

async function ttft(url, headers, n) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const res = await fetch(url, {
      method: 'POST',
      headers,
      body: JSON.stringify({ ...CHAT, stream: true }),
    });
    const reader = res.body.getReader();
    await reader.read();
    out.push(performance.now() - t0);
    while (!(await reader.read()).done);
  }
  return out;
}

async function deploy(berth, fakeUrl) {
  const h = { authorization: `Bearer ${berth.key}`, 'content-type': 'application/json' };
  const post = async (path, body) => {
    const r = await fetch(`${berth.url}/v0${path}`, {
      method: 'POST',
      headers: h,
      body: JSON.stringify(body),
    });
    if (!r.ok) throw new Error(`POST ${path}: ${r.status} ${await r.text()}`);
  };
  await post('/integrations/connections', {
    metadata: { name: 'fake' },
    spec: { integration: 'openai', config: { baseUrl: fakeUrl }, secret: { apiKey: 'sk-bench' } },
  });
  await post('/models', {
    metadata: { name: 'bench' },
    spec: { integrationConnections: ['fake'], runtime: { type: 'openai', model: 'fake-gpt' } },
  });
  for (let i = 0; i < 200; i++) {
    const m = await (await fetch(`${berth.url}/v0/models/bench`, { headers: h })).json();
    if (m.status === 'DEPLOYED') return;
    if (m.status === 'FAILED') throw new Error(`model failed: ${m.events.at(-1)?.message}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('model never deployed');
}

export async function benchModels() {
  const fake = await startScript(FAKE, {
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import tsx`.trim(),
  });
  const berth = await startBerth();
  try {
    await deploy(berth, fake.url);
    const direct = `${fake.url}/v1/chat/completions`;
    const via = `${berth.url}/run/default/models/bench/v1/chat/completions`;
    const dh = { authorization: 'Bearer sk-bench', 'content-type': 'application/json' };
    const bh = { authorization: `Bearer ${berth.key}`, 'content-type': 'application/json' };
    const body = JSON.stringify(CHAT);
    const streamBody = JSON.stringify({ ...CHAT, stream: true });
    await run({ url: via, headers: bh, body, duration: 1 }); // warm-up: pools, JIT, caches

    const d = await run({ url: direct, headers: dh, body });
    const b = await run({ url: via, headers: bh, body });
    const ds = await run({ url: direct, headers: dh, body: streamBody });
    const bs = await run({ url: via, headers: bh, body: streamBody });
    const dt = await ttft(direct, dh, TTFT_SAMPLES);
    const bt = await ttft(via, bh, TTFT_SAMPLES);

    header(
      `models (autocannon, ${CONNECTIONS} connections, ${DURATION_S}s each; TTFT over ${TTFT_SAMPLES} sequential calls)`,
    );
    row('chat req/s (via Berth vs direct)', b.requests.average, d.requests.average, 'req/s');
    row('chat p50 latency', b.latency.p50, d.latency.p50, 'ms');
    row('chat p99 latency', b.latency.p99, d.latency.p99, 'ms');
    row('stream req/s', bs.requests.average, ds.requests.average, 'req/s');
    row('stream p50 latency (whole answer)', bs.latency.p50, ds.latency.p50, 'ms');
    row('stream p99 latency (whole answer)', bs.latency.p99, ds.latency.p99, 'ms');
    row('time to first token p50', pct(bt, 50), pct(dt, 50), 'ms');
    row('time to first token p99', pct(bt, 99), pct(dt, 99), 'ms');
    console.log(
      `added by the gateway: chat p50 +${(b.latency.p50 - d.latency.p50).toFixed(2)} ms, p99 +${(b.latency.p99 - d.latency.p99).toFixed(2)} ms; ` +
        `first token p50 +${(pct(bt, 50) - pct(dt, 50)).toFixed(2)} ms, p99 +${(pct(bt, 99) - pct(dt, 99)).toFixed(2)} ms`,
    );
    const errs = d.non2xx + b.non2xx + ds.non2xx + bs.non2xx + d.errors + b.errors + ds.errors + bs.errors;
    if (errs) console.log(`WARNING: ${errs} non-2xx responses or errors during the run`);
    return {
      addedP50: b.latency.p50 - d.latency.p50,
      throughputRatio: b.requests.average / d.requests.average,
    };
  } finally {
    await berth.stop();
    await fake.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchModels();
