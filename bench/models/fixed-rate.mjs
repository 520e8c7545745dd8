// The fixed-rate load of bench/models, in a process of its own (decision 088): open loop, each call timed from
// the moment it was due, the paths interleaved in short slices so that a burst of the machine's other load lands
// on all of them alike. It sleeps between sends instead of spinning: the generator that spun on setImmediate
// held one of the machine's two cores for the whole phase, and the servers it measured queued for the other.
//
// Input (argv[2], JSON): { targets: [{ name, url, headers }], body, rate, sliceMs, rounds, warmupMs }.
// Output (stdout, one JSON line): { paths: { [name]: { latencies: [...ms], late: [...ms], errors } }, cpuMs, wallMs },
// where `late` is how long after its due time each call left this process (this generator's own share of the
// tail), and cpuMs / wallMs the generator's own CPU time and lifetime.
import { Agent } from 'undici';

const { targets, body, rate, sliceMs, rounds, warmupMs } = JSON.parse(process.argv[2]);
const payload = Buffer.from(body);

/** One keep-alive pool per target, more connections than the rate ever keeps busy on loopback. */
const agents = new Map(targets.map((t) => [t.name, new Agent({ connections: 64, pipelining: 1 })]));

/**
 * One call through undici's dispatch API (no `request()` wrapper: no Readable, no AsyncResource per call), so
 * the generator allocates little and its own collections stay out of the figures as far as they can.
 */
function call(agent, origin, path, headers, onDone) {
  let status = 0;
  agent.dispatch(
    { origin, path, method: 'POST', headers, body: payload },
    {
      onConnect() {},
      onHeaders(s) {
        status = s;
        return true;
      },
      onData() {
        return true;
      },
      onComplete() {
        onDone(status >= 200 && status < 300);
      },
      onError() {
        onDone(false);
      },
    },
  );
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Sends `rate` calls a second to `t` for `ms`, on schedule whatever the answers' pace; resolves when every call
 * sent has answered. `into` (absent during warm-up) collects latency from the due time and the send lateness.
 */
function slice(t, ms, into) {
  const agent = agents.get(t.name);
  const u = new URL(t.url);
  const { headers } = t;
  const total = Math.floor((ms * rate) / 1000);
  const interval = 1000 / rate;
  return new Promise((resolve) => {
    const start = performance.now();
    let sent = 0;
    let open = 0;
    const tick = () => {
      const now = performance.now();
      for (; sent < total && start + sent * interval <= now; sent++) {
        const due = start + sent * interval;
        open++;
        if (into) into.late.push(now - due);
        call(agent, u.origin, u.pathname, headers, (ok) => {
          if (into) {
            if (ok) into.latencies.push(performance.now() - due);
            else into.errors++;
          }
          if (--open === 0 && sent === total) resolve();
        });
      }
      if (sent < total) setTimeout(tick, Math.max(0, start + sent * interval - performance.now()));
      else if (open === 0) resolve();
    };
    tick();
  });
}

const out = Object.fromEntries(targets.map((t) => [t.name, { latencies: [], late: [], errors: 0 }]));
for (const t of targets) await slice(t, warmupMs);
for (let r = 0; r < rounds; r++) {
  // Rotated each round, so no path always follows another (a server's collection triggered by the previous
  // slice's garbage, say).
  for (let i = 0; i < targets.length; i++) {
    const t = targets[(i + r) % targets.length];
    await slice(t, sliceMs, out[t.name]);
    await sleep(20);
  }
}
await Promise.all([...agents.values()].map((a) => a.close()));
const cpu = process.cpuUsage();
process.stdout.write(
  `${JSON.stringify({ paths: out, cpuMs: (cpu.user + cpu.system) / 1000, wallMs: performance.now() })}\n`,
);
