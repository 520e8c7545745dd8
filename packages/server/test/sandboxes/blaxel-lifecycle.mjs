// The service SDK's own lifecycle and proxy flows (its tests' steps, unmodified @blaxel/core) against Berth's wire
// gaps of decision 047: a TTL counted from when the sandbox is ready, an expired sandbox's name free as soon as it
// reads TERMINATED, a deleted sandbox gone right after its DELETE, a create that fails leaving nothing behind,
// proxy routing secrets echoed by the create and omitted on reads, and a data-plane error the SDK can read.
// Prints one `RESULT <json>` line; a failed step records its error.
import { SandboxInstance } from '@blaxel/core';

const memory = Number(process.env.SANDBOX_MEMORY);
const prefix = process.env.SANDBOX_PREFIX;
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
const status = async (name) => {
  try {
    return (await SandboxInstance.get(name)).status;
  } catch (e) {
    return e.code ?? e.status ?? String(e);
  }
};

// The SDK suite's 'sandbox terminates after TTL string expires', as written there.
await step('ttl', async () => {
  const name = `${prefix}-ttl`;
  const first = await SandboxInstance.create({ name, memory, ttl: '1s' });
  const created = { status: first.status, expiresIn: first.sandbox.expiresIn };
  await first.fs.write('/tmp/ttl-marker.txt', 'this-should-not-persist');
  const written = await first.fs.read('/tmp/ttl-marker.txt');
  await sleep(1100);
  const after = await status(name);
  const second = await SandboxInstance.create({ name, memory });
  let marker;
  try {
    marker = await second.fs.read('/tmp/ttl-marker.txt');
  } catch {
    marker = null;
  }
  const again = second.status;
  await SandboxInstance.delete(name);
  return { created, written, after, again, marker };
});

await step('deleted', async () => {
  const name = `${prefix}-del`;
  const sb = await SandboxInstance.create({ name, memory });
  const answer = await SandboxInstance.delete(name);
  const right = await status(name);
  let oldHandle;
  try {
    await sb.fs.read('/etc/hostname');
    oldHandle = 'read';
  } catch (e) {
    oldHandle = e.message;
  }
  const reused = (await SandboxInstance.create({ name, memory })).status;
  await SandboxInstance.delete(name);
  return { answered: answer.status, right, oldHandle, reused };
});

// The SDK suite's 'fails to create a sandbox with a random non-existent image', then 'was not created'.
await step('badImage', async () => {
  const name = `${prefix}-badimg`;
  let created;
  try {
    await SandboxInstance.create({ name, memory, image: 'localhost:1/none/such:tag' }, { safe: true });
    created = 'created';
  } catch {
    created = 'rejected';
  }
  return { created, after: await status(name) };
});

// The SDK suite's proxy create and get tests.
await step('proxy', async () => {
  const name = `${prefix}-proxy`;
  const routing = [
    {
      destinations: ['api.stripe.test'],
      headers: { Authorization: 'Bearer {{SECRET:stripe-key}}' },
      secrets: { 'stripe-key': 'sk-live-test123' },
    },
  ];
  const sb = await SandboxInstance.create({ name, memory, network: { proxy: { routing } } });
  const echoed = sb.spec.network?.proxy?.routing?.[0]?.secrets;
  const read = (await SandboxInstance.get(name)).spec.network?.proxy?.routing?.[0];
  const updated = await SandboxInstance.updateTtl(name, '1h');
  // What the server keeps, asked as the admin may (show_secrets): the update that sent no secrets kept them.
  const stored = await (
    await fetch(`${process.env.BL_API_URL}/sandboxes/${name}?show_secrets=true`, {
      headers: { authorization: `Bearer ${process.env.BL_API_KEY}` },
    })
  ).json();
  return {
    stored: stored.spec.network.proxy.routing[0].secrets,
    echoed,
    readSecrets: read?.secrets ?? null,
    readHeaders: read?.headers,
    updatedTtl: updated.spec.runtime.ttl,
    updatedSecrets: updated.spec.network?.proxy?.routing?.[0]?.secrets ?? null,
  };
});

await step('dataPlaneError', async () => {
  const sb = await SandboxInstance.get(`${prefix}-proxy`);
  await SandboxInstance.delete(`${prefix}-proxy`);
  try {
    await sb.process.exec({ command: 'true' });
    return 'ran';
  } catch (e) {
    return e.message;
  }
});

console.log(`RESULT ${JSON.stringify(out)}`);
