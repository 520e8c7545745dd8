// The unmodified @blaxel/core SDK creates a sandbox from an image of a loopback registry (env from the parent
// test), runs a process in it, and tries an image the registry lacks; prints one `RESULT <json>` line.
import { SandboxInstance } from '@blaxel/core';

const out = {};
const sb = await SandboxInstance.create({
  name: process.env.SANDBOX_NAME,
  image: process.env.SANDBOX_IMAGE,
  memory: Number(process.env.SANDBOX_MEMORY),
});
out.created = { status: sb.status, image: sb.spec?.runtime?.image };
const r = await sb.process.exec({
  command: 'sh -c "cat /srv/hello.txt; echo $GREETING; pwd"',
  waitForCompletion: true,
});
out.exec = { exitCode: r.exitCode, stdout: r.stdout };
await SandboxInstance.delete(process.env.SANDBOX_NAME);
try {
  const missing = await SandboxInstance.create({
    name: `${process.env.SANDBOX_NAME}-missing`,
    image: process.env.MISSING_IMAGE,
    memory: Number(process.env.SANDBOX_MEMORY),
  });
  out.missing = { status: missing.status };
} catch (e) {
  out.missing = { error: e.message };
}
process.stdout.write(`RESULT ${JSON.stringify(out)}\n`);
