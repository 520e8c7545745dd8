// The unmodified @blaxel/core sandbox flow through one server of a cluster (test/cluster/placement.test.ts): create,
// exec, write and read a file. Prints one `RESULT <json>` line; a failed step records its error.
import { SandboxInstance } from '@blaxel/core';

const name = process.env.SANDBOX_NAME;
const out = {};
const step = async (k, fn) => {
  try {
    out[k] = await fn();
  } catch (e) {
    out[k] = { error: `${e?.message ?? e} ${JSON.stringify(e?.error ?? '')}`.trim() };
  }
};
let sb;
await step('create', async () => {
  sb = await SandboxInstance.create({ name, memory: Number(process.env.SANDBOX_MEMORY) });
  return sb.status;
});
await step('exec', async () => {
  const r = await sb.process.exec({ command: 'echo -n $((6 * 7))', waitForCompletion: true });
  return r.logs ?? r.stdout;
});
await step('fs', async () => {
  await sb.fs.write('/home/user/cluster.txt', 'through another node');
  return await sb.fs.read('/home/user/cluster.txt');
});
console.log(`RESULT ${JSON.stringify(out)}`);
