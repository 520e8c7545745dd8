// Snapshots under use, with the unmodified @blaxel/core SDK (decision 053): a preview request, a WebSocket through
// the preview and a process's log stream held open on the source while a snapshot is taken (none dropped), then CYCLES rounds of writes,
// snapshot, more writes and restore, each checked byte for byte. Prints one `RESULT <json>` line.
import { SandboxInstance } from '@blaxel/core';
import WebSocket from 'ws';

const memory = Number(process.env.SANDBOX_MEMORY);
const p = process.env.SANDBOX_PREFIX;
const cycles = Number(process.env.CYCLES);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const out = {};
const step = async (name, fn) => {
  try {
    out[name] = await fn();
  } catch (e) {
    out[name] = {
      error: `${e?.message ?? e} ${JSON.stringify(e?.error ?? '')}`.trim(),
      code: e?.code ?? e?.status,
    };
  }
};
const deployed = async (name) => {
  for (let i = 0; i < 300; i++) {
    const sb = await SandboxInstance.get(name);
    if (sb.status === 'DEPLOYED') return sb;
    await sleep(50);
  }
  throw new Error(`${name} never DEPLOYED again`);
};
const sh = async (sb, command) => (await sb.process.exec({ command, waitForCompletion: true })).stdout.trim();

const name = `${p}-held`;
const sb = await SandboxInstance.create({ name, memory });
await step('held', async () => {
  // Answers /slow after 1.5 s: the request is in flight while the snapshot freezes and thaws the sandbox. A
  // WebSocket upgrade gets a text frame every 50 ms (the handshake and frames written by hand: no package inside).
  const server = `const http = require('http'), crypto = require('crypto');
const s = http.createServer((q, r) => setTimeout(() => r.end('slow-ok'), q.url === '/slow' ? 1500 : 0));
s.on('upgrade', (q, sock) => {
  const accept = crypto.createHash('sha1').update(q.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  sock.write('HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: ' + accept + '\\r\\n\\r\\n');
  let i = 0;
  const t = setInterval(() => { const p = Buffer.from('tick-' + ++i); sock.write(Buffer.concat([Buffer.from([0x81, p.length]), p])); }, 50);
  sock.on('close', () => clearInterval(t));
  sock.on('error', () => clearInterval(t));
});
s.listen(3000);
`;
  await sb.fs.write('/home/user/web.js', server);
  await sb.process.exec({ name: 'web', command: 'node /home/user/web.js', waitForPorts: [3000] });
  const preview = await sb.previews.create({
    metadata: { name: 'held-web' },
    spec: { port: 3000, public: true },
  });
  await sb.process.exec({
    name: 'ticker',
    command: 'i=0; while true; do i=$((i+1)); echo tick-$i; sleep 0.05; done',
  });
  const ticks = [];
  const stream = sb.process.streamLogs('ticker', {
    onLog: (l) => ticks.push(l),
    onError: () => ticks.push('ERROR'),
  });
  const frames = [];
  let wsClosed = 'open';
  const ws = new WebSocket(`${preview.spec.url.replace(/^http/, 'ws')}/ws`);
  ws.on('message', (m) => frames.push(String(m)));
  ws.on('close', (code) => (wsClosed = `closed ${code}`));
  ws.on('error', (e) => (wsClosed = `error ${e.message}`));
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  await sleep(300);
  const inFlight = fetch(`${preview.spec.url}/slow`).then(async (r) => `${r.status} ${await r.text()}`);
  await sleep(200);
  const before = ticks.length;
  const framesBefore = frames.length;
  const snap = await sb.snapshots.create('while-serving');
  await sleep(400);
  const after = ticks.length;
  const framesAfter = frames.length;
  const answer = await inFlight;
  const wsState = wsClosed;
  ws.close();
  stream.close();
  return {
    websocket: {
      state: wsState,
      framesAfterSnapshot: framesAfter - framesBefore > 0,
      inOrder: frames.every((f, i) => f === `tick-${i + 1}`),
    },
    status: snap.status,
    answer,
    ticksAfterSnapshot: after - before > 0,
    streamErrors: ticks.filter((t) => t === 'ERROR').length,
    stillRunning: (await sb.process.get('ticker')).status,
  };
});
await step('cycles', async () => {
  const bad = [];
  let current = sb;
  for (let i = 0; i < cycles; i++) {
    const blob = Array.from({ length: 64 }, () => Math.random().toString(36)).join('');
    await current.fs.write(`/home/user/data/f${i}.txt`, blob);
    await current.fs.write('/home/user/data/common.txt', `round ${i} ${blob.slice(0, 16)}`);
    if (i > 0) await sh(current, `rm -f /home/user/data/f${i - 1}.txt`);
    const expected = await sh(current, 'cd /home/user/data && sha256sum $(ls | sort) | sha256sum');
    const snap = await current.snapshots.create(`c${i}`);
    await current.fs.write('/home/user/data/common.txt', 'overwritten after the snapshot');
    await current.fs.write('/home/user/data/junk.txt', 'written after the snapshot');
    await sh(current, `rm -f /home/user/data/f${i}.txt`);
    await current.snapshots.restore(snap.id);
    current = await deployed(name);
    const got = await sh(current, 'cd /home/user/data && sha256sum $(ls | sort) | sha256sum');
    if (got !== expected) bad.push({ round: i, expected, got, ls: await sh(current, 'ls /home/user/data') });
  }
  return { rounds: cycles, bad };
});
await SandboxInstance.delete(name).catch(() => {});
console.log(`RESULT ${JSON.stringify(out)}`);
