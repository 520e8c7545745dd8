// The service SDK's own session test, unmodified @blaxel/core: a sandbox on the default image, a session of it, and a
// file written at the root through the session (`/session-test.txt`), then read back both ways; prints one
// `RESULT <json>` line.
import { SandboxInstance } from '@blaxel/core';

const name = process.env.SANDBOX_NAME;
const sb = await SandboxInstance.create({ name, memory: Number(process.env.SANDBOX_MEMORY) });
const session = await sb.sessions.create();
const viaSession = await SandboxInstance.fromSession(session);
await viaSession.fs.write('/session-test.txt', 'Hello from a session');
const out = {
  viaSession: await viaSession.fs.read('/session-test.txt'),
  viaSandbox: await sb.fs.read('/session-test.txt'),
  cat: (await sb.process.exec({ command: 'cat /session-test.txt', waitForCompletion: true })).stdout,
};
await sb.sessions.delete(session.name);
process.stdout.write(`RESULT ${JSON.stringify(out)}\n`);
