// The service SDK's own calls for the wire gaps (externalId, paged lists, region names, runtime fields, unnamed
// processes, sessions, env updates, expiry on read), each as its test suite makes them, with the unmodified
// @blaxel/core pointed at Berth. Prints what it saw as one `RESULT <json>` line; a failed step records its error.
import { SandboxInstance, updateSandbox } from '@blaxel/core';

const memory = Number(process.env.SANDBOX_MEMORY);
const prefix = process.env.SANDBOX_PREFIX;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const out = {};
const step = async (name, fn) => {
  try {
    out[name] = await fn();
  } catch (e) {
    out[name] = {
      error: `${e?.message ?? e} ${JSON.stringify(e?.error ?? e?.body ?? '')}`.trim(),
      code: e?.code ?? e?.status,
    };
  }
};

const name = `${prefix}-main`;
const externalId = `ext:${prefix}.1`;
let sb;
await step('create', async () => {
  sb = await SandboxInstance.create({
    name,
    memory,
    externalId,
    region: 'us-pdx-1',
    extraArgs: { iptables: 'enabled' },
    envs: [{ name: 'GREETING', value: 'one' }],
  });
  return {
    status: sb.status,
    externalId: sb.metadata.externalId,
    region: sb.spec.region,
    extraArgs: sb.spec.runtime.extraArgs,
    image: sb.spec.runtime.image,
  };
});

await step('byExternalId', async () => (await SandboxInstance.getByExternalId(externalId)).metadata.name);
await step('byUnknownExternalId', async () => {
  try {
    await SandboxInstance.getByExternalId(`${prefix}-nobody`);
    return 'found';
  } catch (e) {
    return e.code ?? e.status;
  }
});

await step('extraArgsOnRead', async () => {
  const got = await SandboxInstance.get(name);
  return { extraArgs: got.spec.runtime.extraArgs, events: got.events.map((e) => e.message) };
});

await step('updateMetadataKeepsExternalId', async () => {
  const updated = await SandboxInstance.updateMetadata(name, { labels: { team: 'sdk' } });
  return { externalId: updated.metadata.externalId, labels: updated.metadata.labels };
});

await step('others', async () => {
  for (const n of ['a', 'b', 'c'])
    await SandboxInstance.create({
      name: `${prefix}-${n}`,
      memory,
      externalId: n === 'a' ? externalId : undefined,
    });
  return true;
});

await step('listAutoPaging', async () => {
  const page = await SandboxInstance.list({ limit: 2 });
  const names = [];
  for await (const s of page) names.push(s.metadata.name);
  return {
    firstPage: page.data.length,
    hasMore: page.hasMore,
    names: names.filter((n) => n.startsWith(prefix)),
  };
});

await step('listByExternalId', async () => {
  const page = await SandboxInstance.list({ externalId });
  return (await page.autoPagingToArray({ limit: 100 })).map((s) => s.metadata.name).sort();
});

await step('execWithoutName', async () => {
  const p = await sb.process.exec({ command: 'echo unnamed', waitForCompletion: true });
  const again = await sb.process.get(p.name);
  return { name: p.name, logs: await sb.process.logs(p.name, 'stdout'), status: again.status };
});

await step('immutableExtraArgs', async () => {
  const cur = await SandboxInstance.get(name);
  const body = {
    ...cur.sandbox,
    spec: { ...cur.spec, runtime: { ...cur.spec.runtime, extraArgs: { iptables: 'disabled' } } },
  };
  const { response } = await updateSandbox({ path: { sandboxName: name }, body });
  return response.status;
});

await step('session', async () => {
  const session = await sb.sessions.create();
  const viaSession = await SandboxInstance.fromSession(session);
  const p = await viaSession.process.exec({
    name: 'in-session',
    command: 'echo from-session',
    waitForCompletion: true,
  });
  await viaSession.fs.write('/tmp/session.txt', 'session file');
  const events = [];
  await viaSession.fs.mkdir('/tmp/session-watch');
  const watcher = viaSession.fs.watch('/tmp/session-watch', (e) => events.push(e));
  for (let i = 0; i < 100 && !events.length; i++) {
    await viaSession.fs.write(`/tmp/session-watch/f${i}.txt`, 'x');
    await sleep(100);
  }
  watcher.close();
  const logs = await viaSession.process.logs('in-session', 'stdout');
  const listed = (await sb.sessions.list()).map((s) => s.name);
  await sb.sessions.delete(session.name);
  const afterDelete = (await sb.sessions.list()).map((s) => s.name);
  return {
    url: session.url,
    exitCode: p.exitCode,
    logs,
    read: await sb.fs.read('/tmp/session.txt'),
    watched: events.length > 0,
    listed: listed.includes(session.name),
    listedAfterDelete: afterDelete.includes(session.name),
  };
});

await step('upgrade', async () => {
  const web = `node -e "require('http').createServer((q, r) => r.end('web-ok')).listen(3000, '127.0.0.1')"`;
  await sb.process.exec({ name: 'web', command: web, waitForPorts: [3000] });
  const preview = await sb.previews.create({
    metadata: { name: 'up-web' },
    spec: { port: 3000, public: true },
  });
  await sb.process.exec({ name: 'survivor', command: 'echo started; sleep 2; echo finished' });
  const pid = (await sb.process.get('survivor')).pid;
  const answer = await sb.system.upgrade({});
  const during = await sb.process.get('survivor');
  const previewAfter = await (await fetch(preview.spec.url)).text();
  const done = await sb.process.wait('survivor', { maxWait: 20_000, interval: 200 });
  const health = await (
    await fetch(`${sb.metadata.url}/health`, {
      headers: { 'x-blaxel-authorization': `Bearer ${process.env.BL_API_KEY}` },
    })
  ).json();
  return {
    message: answer.message,
    samePid: during.pid === pid,
    statusDuring: during.status,
    previewAfter,
    final: {
      status: done.status,
      exitCode: done.exitCode,
      logs: await sb.process.logs('survivor', 'stdout'),
    },
    upgraded: typeof health.upgradedAt === 'string',
    upgradeCount: health.upgradeCount,
    lastUpgrade: health.lastUpgrade?.status,
  };
});

await step('envUpdate', async () => {
  await sb.fs.write('/tmp/before-update.txt', 'ephemeral');
  await sb.process.exec({ name: 'sleeper', command: 'sleep 600' });
  const cur = await SandboxInstance.get(name);
  const body = {
    ...cur.sandbox,
    spec: { ...cur.spec, runtime: { ...cur.spec.runtime, envs: [{ name: 'GREETING', value: 'two' }] } },
  };
  const { data } = await updateSandbox({ path: { sandboxName: name }, body, throwOnError: true });
  const fresh = await SandboxInstance.get(name);
  const echo = await fresh.process.exec({ command: 'echo $GREETING', waitForCompletion: true });
  let file;
  try {
    file = await fresh.fs.read('/tmp/before-update.txt');
  } catch {
    file = null;
  }
  const procs = (await fresh.process.list()).map((p) => p.name);
  return {
    status: data.status,
    state: data.state,
    greeting: echo.stdout.trim(),
    file,
    sleeperKept: procs.includes('sleeper'),
  };
});

await step('ttlExpiry', async () => {
  const short = await SandboxInstance.create({ name: `${prefix}-ttl`, memory, ttl: '4s' });
  const before = short.status;
  await sleep(4500);
  return { before, after: (await SandboxInstance.get(`${prefix}-ttl`)).status };
});

console.log(`RESULT ${JSON.stringify(out)}`);
