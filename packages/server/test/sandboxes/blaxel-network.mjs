// The unmodified @blaxel/core SDK sets `network` on create and changes it with updateNetwork (a PUT of the whole
// spec); prints what curl inside the sandbox got each time as one `RESULT <json>` line.
import { SandboxInstance } from '@blaxel/core';

const name = process.env.SANDBOX_NAME;
const memory = Number(process.env.SANDBOX_MEMORY);
const ca = process.env.UPSTREAM_CA;
const out = {};

const sb = await SandboxInstance.create({ name, memory, network: { allowedDomains: ['allowed.test'] } });
out.created = { status: sb.status, network: sb.spec.network };
await sb.fs.write('/tmp/ca.pem', ca);
const curl = async (url) =>
  (
    await sb.process.exec({
      command: `curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert /tmp/ca.pem ${url}; echo " $?"`,
      waitForCompletion: true,
    })
  ).stdout.trim();
out.before = { allowed: await curl('https://allowed.test/'), other: await curl('https://other.test/') };

const updated = await SandboxInstance.updateNetwork(name, {
  network: { allowedDomains: ['other.test'], forbiddenDomains: ['allowed.test'] },
});
out.updated = { status: updated.status };
// The PUT answers before the controller has applied it: wait until the status says it has.
for (let i = 0; i < 200; i++) {
  const s = await SandboxInstance.get(name);
  if (s.status === 'DEPLOYED') break;
  await new Promise((r) => setTimeout(r, 50));
}
out.after = { allowed: await curl('https://allowed.test/'), other: await curl('https://other.test/') };
await SandboxInstance.delete(name);
console.log(`RESULT ${JSON.stringify(out)}`);
