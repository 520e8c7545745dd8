// bench/models: the same chat request (JSON and streamed) sent straight to a fake provider (a child
// process), through a bare undici proxy (the least one hop costs), through Portkey's open-source gateway
// (@portkey-ai/gateway, run locally) and through the Berth model gateway, in one run. Prints throughput, p50/p99
// latency and time-to-first-token, and what Berth adds over direct; then p50/p99 at a fixed 1,000 req/s, the load
// coming from a process of its own with direct, the bare proxy and Berth taking turns (fixed-rate.mjs).
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { startBerth, startScript } from '../lib/berth.mjs';
import { header, row } from '../lib/report.mjs';

const require = createRequire(import.meta.url);
const autocannon = require('autocannon');
const DURATION_S = Number(process.env.BENCH_DURATION ?? 5);
const CONNECTIONS = 32;
/** Sequential streamed calls per path for time-to-first-token percentiles. */
const TTFT_SAMPLES = 300;
/** Sequential non-streamed calls per path for the latency one hop adds when nothing queues. */
const SEQ_SAMPLES = 1000;
/**
 * The issue's fixed load: p99 at this many calls a second, sent on schedule whatever the answers' pace. Above what
 * the machine serves (a loaded one) the calls queue and p99 measures the queue: BENCH_FIXED_RATE lowers it.
 */
const FIXED_RATE = Number(process.env.BENCH_FIXED_RATE ?? 1000);
const FAKE = new URL('../../packages/server/src/test-support/fake-provider.ts', import.meta.url).pathname;
const BARE = new URL('../lib/bare-proxy.mjs', import.meta.url).pathname;
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

const freePort = () =>
  new Promise((resolve) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });

/** Portkey's gateway as its package ships it (`start-server.js --headless`), on a free loopback port. */
async function startPortkey() {
  const port = await freePort();
  const bin = require.resolve('@portkey-ai/gateway/build/start-server.js');
  const child = spawn(process.execPath, [bin, `--port=${port}`, '--headless'], {
    env: { ...process.env, NODE_ENV: 'production' },
    stdio: 'ignore',
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    const ok = await fetch(url).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    async stop() {
      const done = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await done;
    },
  };
}

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

/** Latencies of `n` sequential non-streamed chat calls, on one keep-alive connection (undici). */
async function sequential(url, headers, n) {
  const { request, Agent } = require('undici');
  const agent = new Agent({ connections: 1 });
  const body = JSON.stringify(CHAT);
  const out = [];
  try {
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const res = await request(url, { method: 'POST', headers, body, dispatcher: agent });
      await res.body.arrayBuffer();
      out.push(performance.now() - t0);
    }
  } finally {
    await agent.close();
  }
  return out;
}

const GENERATOR = new URL('./fixed-rate.mjs', import.meta.url).pathname;
/** Each path's share of the fixed-rate phase comes in slices this long, the paths taking turns. */
const SLICE_MS = 250;

/**
 * Latencies of non-streamed chat calls sent at a fixed `rate`, `seconds` per path, each measured from the
 * moment it was due (not when it was sent), so a stall counts for every call it delays (no coordinated
 * omission). The load comes from a process of its own (fixed-rate.mjs) that sleeps between sends, the paths
 * taking turns in slices of SLICE_MS (decision 088). Returns per path `{ latencies, late, errors }`, and the
 * generator's own CPU time and lifetime.
 */
function fixedRate(paths, rate, seconds) {
  const spec = {
    targets: Object.entries(paths).map(([name, p]) => ({ name, url: p.url, headers: p.headers })),
    body: JSON.stringify(CHAT),
    rate,
    sliceMs: SLICE_MS,
    rounds: Math.max(1, Math.round((seconds * 1000) / SLICE_MS)),
    warmupMs: 300,
  };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [GENERATOR, JSON.stringify(spec)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`fixed-rate generator exited with ${code}`)),
    );
  });
}

/**
 * prom-client samples the event loop with a 10 ms timer (`monitorEventLoopDelay`, its default precision) and
 * records the whole interval between ticks, so an idle loop reads 10 ms: a stall is what a tick took beyond it.
 */
const LAG_RESOLUTION_MS = 10;

/**
 * The server's longest event-loop stall since the last scrape (prom-client's default series, in ms beyond the
 * sampling interval), and its garbage collections by kind so far (count and seconds, cumulative).
 */
async function loopStats(berth) {
  const r = await fetch(`${berth.url}/metrics`, { headers: { authorization: `Bearer ${berth.key}` } });
  const text = await r.text();
  const m = /^nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(text);
  const gc = {};
  for (const [, what, kind, v] of text.matchAll(
    /^nodejs_gc_duration_seconds_(sum|count)\{kind="(\w+)"\} (\S+)$/gm,
  )) {
    gc[kind] ??= { sum: 0, count: 0 };
    gc[kind][what] = Number(v);
  }
  return { stallMs: m ? Math.max(0, Number(m[1]) * 1000 - LAG_RESOLUTION_MS) : Number.NaN, gc };
}

/** Garbage collections between two `loopStats` readings: `major 2 (14.1 ms), minor 31 (22.0 ms)`. */
function gcBetween(a, b) {
  return Object.entries(b)
    .map(([kind, v]) => {
      const n = v.count - (a[kind]?.count ?? 0);
      const ms = (v.sum - (a[kind]?.sum ?? 0)) * 1000;
      return n ? `${kind} ${n} (${ms.toFixed(1)} ms)` : '';
    })
    .filter(Boolean)
    .join(', ');
}

/** The fixed-rate phase's lines: Berth beside the bare proxy, and both beside the direct path, same run. */
function printFixed(r) {
  const { direct: d, bare: x, berth: b } = r;
  row(`chat p50 at a fixed ${FIXED_RATE} req/s`, pct(b.fixed, 50), pct(x.fixed, 50), 'ms');
  row(`chat p99 at a fixed ${FIXED_RATE} req/s`, pct(b.fixed, 99), pct(x.fixed, 99), 'ms', '<= 1 ms');
  console.log(
    `at a fixed ${FIXED_RATE} req/s: direct p50 ${pct(d.fixed, 50).toFixed(2)} / p99 ${pct(d.fixed, 99).toFixed(2)} ms; ` +
      `Berth adds p50 +${(pct(b.fixed, 50) - pct(d.fixed, 50)).toFixed(2)} / p99 +${(pct(b.fixed, 99) - pct(d.fixed, 99)).toFixed(2)} ms, ` +
      `the bare proxy p50 +${(pct(x.fixed, 50) - pct(d.fixed, 50)).toFixed(2)} / p99 +${(pct(x.fixed, 99) - pct(d.fixed, 99)).toFixed(2)} ms; ` +
      `Berth's longest event-loop stall during the phase ${b.stallMs.toFixed(2)} ms (beyond the ${LAG_RESOLUTION_MS} ms sampling tick); ` +
      `its garbage collections during the phase (all three paths' slices): ${b.gc || 'none'}`,
  );
  console.log(
    `fixed-rate load: its own process, open loop, paths interleaved in ${SLICE_MS} ms slices; ` +
      `calls per path ${d.fixed.length} / ${x.fixed.length} / ${b.fixed.length} (direct / bare / Berth), failed ${d.fixedErrors} / ${x.fixedErrors} / ${b.fixedErrors}; ` +
      `the generator's own send lateness p99 ${pct(d.late, 99).toFixed(2)} / ${pct(x.late, 99).toFixed(2)} / ${pct(b.late, 99).toFixed(2)} ms, ` +
      `its CPU ${((100 * r.generator.cpuMs) / r.generator.wallMs).toFixed(0)} % of one core`,
  );
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
  // Policies and metering on, as a real deployment has them: every call is counted and reserved in a budget.
  await post('/policies', {
    metadata: { name: 'bench-budget' },
    spec: { type: 'maxToken', maxTokens: { total: 1e12, granularity: 'month' } },
  });
  await post('/models', {
    metadata: { name: 'bench' },
    spec: {
      integrationConnections: ['fake'],
      policies: ['bench-budget'],
      runtime: { type: 'openai', model: 'fake-gpt' },
    },
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
  // The fake is TypeScript: load it through tsx, resolved from here so any working directory works.
  const tsx = import.meta.resolve('tsx');
  const fake = await startScript(FAKE, {
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import ${tsx}`.trim(),
  });
  let berth;
  let bare;
  let portkey;
  try {
    // The fake provider listens on loopback: opened as a server with a local model opens it.
    berth = await startBerth({ BERTH_OUTBOUND_ALLOW_CIDRS: '127.0.0.0/8' });
    bare = await startScript(BARE, { TARGET: fake.url });
    portkey = await startPortkey();
    await deploy(berth, fake.url);
    const path = '/v1/chat/completions';
    const dh = { authorization: 'Bearer sk-bench', 'content-type': 'application/json' };
    const bh = { authorization: `Bearer ${berth.key}`, 'content-type': 'application/json' };
    const paths = {
      direct: { url: fake.url + path, headers: dh },
      bare: { url: bare.url + path, headers: dh },
      portkey: {
        url: portkey.url + path,
        headers: { ...dh, 'x-portkey-provider': 'openai', 'x-portkey-custom-host': `${fake.url}/v1` },
      },
      berth: { url: `${berth.url}/run/default/models/bench${path}`, headers: bh },
    };
    const body = JSON.stringify(CHAT);
    const streamBody = JSON.stringify({ ...CHAT, stream: true });
    await run({ ...paths.berth, body, duration: 1 }); // warm-up: pools, JIT, caches
    await run({ ...paths.bare, body, duration: 1 });
    await run({ ...paths.portkey, body, duration: 1 });

    // BENCH_MODELS_PHASES=fixed runs only the fixed-rate phase (for profiling the server under it).
    const onlyFixed = process.env.BENCH_MODELS_PHASES === 'fixed';
    const r = { direct: {}, bare: {}, berth: {} };
    for (const [k, p] of onlyFixed ? [] : Object.entries(paths)) {
      r[k] = {
        chat: await run({ ...p, body }),
        stream: await run({ ...p, body: streamBody }),
        ttft: await ttft(p.url, p.headers, TTFT_SAMPLES),
        seq: k === 'portkey' ? undefined : await sequential(p.url, p.headers, SEQ_SAMPLES),
      };
    }
    // Last, at a fixed rate (not the most the path takes): what a caller sees of the gateway's stalls, the usage
    // flush's among them (Berth runs with a budget on, so every call is reserved and metered).
    const before = await loopStats(berth);
    const fixed = await fixedRate(
      { direct: paths.direct, bare: paths.bare, berth: paths.berth },
      FIXED_RATE,
      DURATION_S,
    );
    const after = await loopStats(berth);
    for (const k of ['direct', 'bare', 'berth']) {
      r[k].fixed = fixed.paths[k].latencies;
      r[k].late = fixed.paths[k].late;
      r[k].fixedErrors = fixed.paths[k].errors;
    }
    r.generator = { cpuMs: fixed.cpuMs, wallMs: fixed.wallMs };
    r.berth.stallMs = after.stallMs;
    r.berth.gc = gcBetween(before.gc, after.gc);
    if (onlyFixed) {
      header(`models, fixed-rate phase only (${DURATION_S}s per path)`);
      printFixed(r);
      return { fixedRateP99: pct(r.berth.fixed, 99) };
    }
    header(
      `models (autocannon, ${CONNECTIONS} connections, ${DURATION_S}s each; TTFT over ${TTFT_SAMPLES} sequential calls)`,
    );
    console.log(
      'baseline = the bare undici proxy (one hop, no auth or metering); Berth runs with a maxToken policy attached',
    );
    const { direct: d, bare: x, berth: b, portkey: pk } = r;
    row('sequential chat p50', pct(b.seq, 50), pct(x.seq, 50), 'ms');
    console.log(
      `sequential p50 added over direct: Berth +${(pct(b.seq, 50) - pct(d.seq, 50)).toFixed(3)} ms, bare proxy +${(pct(x.seq, 50) - pct(d.seq, 50)).toFixed(3)} ms; ` +
        `throughput at ${CONNECTIONS} connections: Berth ${(b.chat.requests.average / x.chat.requests.average).toFixed(2)}x the bare proxy`,
    );
    row('chat req/s via Berth', b.chat.requests.average, x.chat.requests.average, 'req/s');
    row('chat p50 latency', b.chat.latency.p50, x.chat.latency.p50, 'ms');
    row('chat p99 latency', b.chat.latency.p99, x.chat.latency.p99, 'ms');
    row('stream req/s', b.stream.requests.average, x.stream.requests.average, 'req/s');
    row('stream p50 latency (whole answer)', b.stream.latency.p50, x.stream.latency.p50, 'ms');
    row('stream p99 latency (whole answer)', b.stream.latency.p99, x.stream.latency.p99, 'ms');
    row('time to first token p50', pct(b.ttft, 50), pct(x.ttft, 50), 'ms');
    row('time to first token p99', pct(b.ttft, 99), pct(x.ttft, 99), 'ms');
    printFixed(r);
    row('chat req/s direct to the provider', d.chat.requests.average, d.chat.requests.average, 'req/s');
    row(
      'chat req/s via Berth (baseline: via Portkey)',
      b.chat.requests.average,
      pk.chat.requests.average,
      'req/s',
    );
    row('chat p50 latency (baseline: via Portkey)', b.chat.latency.p50, pk.chat.latency.p50, 'ms');
    row('stream p50 latency (baseline: via Portkey)', b.stream.latency.p50, pk.stream.latency.p50, 'ms');
    row('time to first token p50 (baseline: via Portkey)', pct(b.ttft, 50), pct(pk.ttft, 50), 'ms');
    const added = (v, k, f) =>
      `${k} p50 +${(f(v, 50) - f(d, 50)).toFixed(2)} ms, p99 +${(f(v, 99) - f(d, 99)).toFixed(2)} ms`;
    const lat = (which) => (v, q) => (q === 50 ? v[which].latency.p50 : v[which].latency.p99);
    for (const [who, v] of [
      ['Berth', b],
      ['Portkey', pk],
    ])
      console.log(
        `added by ${who} over direct: ${added(v, 'chat', lat('chat'))}; ${added(v, 'stream', lat('stream'))}; ` +
          `${added(v, 'first token', (x, q) => pct(x.ttft, q))}; throughput ${(v.chat.requests.average / d.chat.requests.average).toFixed(2)}x direct`,
      );
    const errs = Object.entries(r)
      // The fixed-rate phase's result has no autocannon counts: it reports its failures itself.
      .filter(([, v]) => v.chat && v.stream)
      .map(([k, v]) => [k, v.chat.non2xx + v.chat.errors + v.stream.non2xx + v.stream.errors])
      .filter(([, n]) => n > 0);
    if (errs.length)
      console.log(
        `WARNING: non-2xx responses or errors during the run: ${errs.map(([k, n]) => `${k} ${n}`).join(', ')}`,
      );
    return {
      addedSequentialP50: pct(b.seq, 50) - pct(d.seq, 50),
      addedFirstTokenP50: pct(b.ttft, 50) - pct(d.ttft, 50),
      throughputVsBare: b.chat.requests.average / x.chat.requests.average,
      fixedRateP99: pct(b.fixed, 99),
    };
  } finally {
    await bare?.stop();
    await portkey?.stop();
    await berth?.stop();
    await fake.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchModels();
