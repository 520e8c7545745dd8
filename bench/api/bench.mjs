// bench/api: autocannon against GET and PUT /v0/policies/{name} and a middle page of GET /v0/policies (?limit=20
// with a cursor, of LIST_OBJECTS policies), beside a bare Fastify route in the same run; the page is measured as
// served again (kept while nothing in it is written, decision 099) and as made anew on each request.
// Targets: GET and list >= 60% and PUT >= 50% of the bare route's throughput; PUT p99 < 10 ms at 100 connections. Also
// printed: each server's CPU per request (utime+stime from /proc), which a loaded machine disturbs far less than req/s.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { startBerth, startScript } from '../lib/berth.mjs';
import { header, row } from '../lib/report.mjs';

const require = createRequire(import.meta.url);
const autocannon = require('autocannon');
const DURATION_S = Number(process.env.BENCH_DURATION ?? 5);
const CONNECTIONS = 100;
const LIST_OBJECTS = 60;
const PAGE = 20;

const run = (opts) =>
  new Promise((resolve, reject) =>
    autocannon({ connections: CONNECTIONS, duration: DURATION_S, ...opts }, (err, res) =>
      err ? reject(err) : resolve(res),
    ),
  );

/** The process's CPU time so far in µs (user + system, clock ticks of 10 ms). */
const cpuUs = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10_000;
};

/** A run against the server `pid`, with that server's CPU per request. */
async function measured(pid, opts) {
  const before = cpuUs(pid);
  const res = await run(opts);
  res.cpuPerRequestUs = (cpuUs(pid) - before) / Math.max(1, res.requests.total);
  return res;
}

export async function benchApi() {
  const berth = await startBerth();
  const policy = {
    metadata: { name: 'bench' },
    spec: { type: 'maxToken', maxTokens: { output: 100000, granularity: 'hour' } },
  };
  const auth = { authorization: `Bearer ${berth.key}`, 'content-type': 'application/json' };
  const created = await fetch(`${berth.url}/v0/policies`, {
    method: 'POST',
    headers: auth,
    body: JSON.stringify(policy),
  });
  if (!created.ok) throw new Error(`create failed: ${created.status} ${await created.text()}`);
  for (let i = 0; i < LIST_OBJECTS; i++) {
    const r = await fetch(`${berth.url}/v0/policies`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ ...policy, metadata: { name: `list-${String(i).padStart(3, '0')}` } }),
    });
    if (!r.ok) throw new Error(`create failed: ${r.status} ${await r.text()}`);
  }
  const body = await (await fetch(`${berth.url}/v0/policies/bench`, { headers: auth })).text();
  const first = await fetch(`${berth.url}/v0/policies?limit=${PAGE}`, { headers: auth });
  const listPath = `/v0/policies?limit=${PAGE}&cursor=${first.headers.get('x-next-cursor')}`;
  const listBody = await (await fetch(berth.url + listPath, { headers: auth })).text();
  if (JSON.parse(listBody).length !== PAGE) throw new Error(`the list page is not ${PAGE} long: ${listBody}`);
  const bare = await startScript(new URL('./bare-server.mjs', import.meta.url).pathname, {
    BARE_BODY: body,
    BARE_LIST_BODY: listBody,
  });
  try {
    const path = '/v0/policies/bench';
    await run({ url: berth.url + path, headers: auth, duration: 1 }); // warm-up
    const bareGet = await measured(bare.pid, { url: bare.url + path });
    const get = await measured(berth.pid, { url: berth.url + path, headers: auth });
    const put = await measured(berth.pid, {
      url: berth.url + path,
      method: 'PUT',
      headers: auth,
      body: JSON.stringify(policy),
    });
    const barePut = await measured(bare.pid, {
      url: bare.url + path,
      method: 'PUT',
      headers: auth,
      body: JSON.stringify(policy),
    });
    const bareList = await measured(bare.pid, { url: bare.url + listPath });
    const list = await measured(berth.pid, { url: berth.url + listPath, headers: auth });
    // The same page, each request asking it with a query the server has not answered before (an ignored
    // parameter): no kept page answers it, so this is a page made from the store on every request.
    let n = 0;
    const fresh = await measured(berth.pid, {
      url: berth.url + listPath,
      headers: auth,
      requests: [{ setupRequest: (r) => ({ ...r, path: `${listPath}&n=${n++}` }) }],
    });
    header(`api (autocannon, ${CONNECTIONS} connections, ${DURATION_S}s each)`);
    const errs = [get, put, list, fresh].reduce((e, r) => e + r.non2xx + r.errors, 0);
    const ratio = row(
      'GET /v0/policies/{name} req/s',
      get.requests.average,
      bareGet.requests.average,
      'req/s',
      '>= 0.60',
    );
    row('GET p50 latency', get.latency.p50, bareGet.latency.p50, 'ms');
    row('GET p99 latency', get.latency.p99, bareGet.latency.p99, 'ms');
    row('PUT /v0/policies/{name} req/s', put.requests.average, barePut.requests.average, 'req/s', '>= 0.50');
    row('PUT p50 latency', put.latency.p50, barePut.latency.p50, 'ms');
    row('PUT p99 latency', put.latency.p99, barePut.latency.p99, 'ms', '< 10 ms');
    const listRatio = row(
      `GET /v0/policies?limit=${PAGE}&cursor= req/s`,
      list.requests.average,
      bareList.requests.average,
      'req/s',
      '>= 0.60',
    );
    row('list p99 latency', list.latency.p99, bareList.latency.p99, 'ms');
    row(
      'same page, made anew each request req/s',
      fresh.requests.average,
      bareList.requests.average,
      'req/s',
    );
    row('GET server CPU per request', get.cpuPerRequestUs, bareGet.cpuPerRequestUs, 'µs');
    row('PUT server CPU per request', put.cpuPerRequestUs, barePut.cpuPerRequestUs, 'µs');
    row('list server CPU per request', list.cpuPerRequestUs, bareList.cpuPerRequestUs, 'µs');
    row('list made anew CPU per request', fresh.cpuPerRequestUs, bareList.cpuPerRequestUs, 'µs');
    console.log(`load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
    if (errs) console.log(`WARNING: ${errs} non-2xx responses or errors during the run`);
    return { getRatio: ratio, listRatio, putP99: put.latency.p99 };
  } finally {
    await bare.stop();
    await berth.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchApi();
