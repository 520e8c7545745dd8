// Drives a sandbox with the unmodified @blaxel/core SDK pointed at Berth (env from the parent test) and prints
// what it saw as one `RESULT <json>` line.
import { SandboxInstance } from '@blaxel/core';

const name = process.env.SANDBOX_NAME;
const memory = Number(process.env.SANDBOX_MEMORY);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const out = {};

const sb = await SandboxInstance.create({ name, memory });
out.created = {
  status: sb.status,
  state: sb.sandbox.state,
  url: sb.metadata.url,
  createdAt: sb.metadata.createdAt,
};

const sync = await sb.process.exec({ command: 'echo hello; exit 4', waitForCompletion: true });
out.sync = { status: sync.status, exitCode: sync.exitCode, stdout: sync.stdout };

const streamedLogs = [];
const streamed = await sb.process.exec({
  command: 'echo out-line; echo err-line >&2',
  waitForCompletion: true,
  onStdout: (l) => streamedLogs.push(`stdout:${l}`),
  onStderr: (l) => streamedLogs.push(`stderr:${l}`),
});
out.streamed = { exitCode: streamed.exitCode, logs: streamedLogs };

await sb.fs.write('/tmp/sdk/a.txt', 'written by the sdk');
out.read = await sb.fs.read('/tmp/sdk/a.txt');
out.ls = (await sb.fs.ls('/tmp/sdk')).files.map((f) => f.name);
await sb.fs.rm('/tmp/sdk/a.txt');
out.lsAfterRm = (await sb.fs.ls('/tmp/sdk')).files.map((f) => f.name);

await sb.fs.mkdir('/tmp/watched');
const events = [];
const watcher = sb.fs.watch('/tmp/watched', (e) => events.push(e), {
  onError: (e) => (out.watchError = e.message),
});
// The watch starts in the background: write until the first event shows it is live (bounded).
for (let i = 0; i < 100 && !events.length; i++) {
  await sb.fs.write(`/tmp/watched/f${i}.txt`, 'x');
  await sleep(100);
}
watcher.close();
out.watch = events[0] ?? null;

await sb.process.exec({ name: 'logger', command: 'echo logged line', waitForCompletion: true });
out.logs = await sb.process.logs('logger', 'stdout');
out.processes = (await sb.process.list())
  .map((p) => p.name)
  .filter(Boolean)
  .sort();

const again = await SandboxInstance.createIfNotExists({ name, memory });
out.again = { status: again.status, createdAt: again.metadata.createdAt };

await SandboxInstance.delete(name);
let last;
for (let i = 0; i < 200; i++) {
  try {
    last = (await SandboxInstance.get(name)).status;
  } catch (e) {
    last = `error ${e.code ?? e.status ?? e.message}`;
  }
  if (last === 'TERMINATED' || last?.startsWith('error')) break;
  await sleep(50);
}
out.afterDelete = last;
console.log(`RESULT ${JSON.stringify(out)}`);
