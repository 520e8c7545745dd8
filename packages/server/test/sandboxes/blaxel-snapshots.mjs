// The service SDK's snapshot, restore, fork and archive calls (unmodified @blaxel/core) against Berth (decision 053).
// Prints one `RESULT <json>` line; a failed step records its error and the steps after it go on.
import { SandboxInstance, Snapshot } from '@blaxel/core';

const memory = Number(process.env.SANDBOX_MEMORY);
const p = process.env.SANDBOX_PREFIX;
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
const failure = async (fn) => {
  try {
    await fn();
    return 'accepted';
  } catch (e) {
    return e?.code ?? e?.status ?? String(e);
  }
};
const read = async (sb, path) => {
  try {
    return await sb.fs.read(path);
  } catch {
    return null;
  }
};
/** The sandbox once it is DEPLOYED again (a restore answers before the start). */
const deployed = async (name) => {
  for (let i = 0; i < 300; i++) {
    const sb = await SandboxInstance.get(name);
    if (sb.status === 'DEPLOYED') return sb;
    await sleep(50);
  }
  throw new Error(`${name} never DEPLOYED again`);
};

const src = `${p}-src`;
let sb;
let snapA;
await step('create', async () => {
  sb = await SandboxInstance.create({ name: src, memory, envs: [{ name: 'GREETING', value: 'hi' }] });
  await sb.fs.write('/home/user/a.txt', 'v1');
  await sb.process.exec({
    command: 'mkdir -p /usr/local/share/snap && echo usr-file > /usr/local/share/snap/x',
    waitForCompletion: true,
  });
  snapA = await sb.snapshots.create('before');
  return {
    id: snapA.id,
    name: snapA.name,
    status: snapA.status,
    workspace: snapA.workspace,
    createdAt: typeof snapA.createdAt,
    source: snapA.source,
    spec: snapA.spec,
  };
});
await step('duplicate', () => failure(() => sb.snapshots.create('before')));
await step('restore', async () => {
  await sb.fs.write('/home/user/a.txt', 'v2');
  await sb.fs.write('/home/user/b.txt', 'later');
  const answer = await sb.snapshots.restore('before');
  const again = await deployed(src);
  return {
    answer,
    a: await read(again, '/home/user/a.txt'),
    b: await read(again, '/home/user/b.txt'),
    usr: (await again.process.exec({ command: 'cat /usr/local/share/snap/x', waitForCompletion: true }))
      .stdout,
    url: again.metadata.url === sb.metadata.url,
  };
});
await step('list', async () => {
  await sb.snapshots.create('second');
  await sb.snapshots.create('third');
  const mine = await sb.snapshots.list();
  const page = await Snapshot.list({ limit: 2 });
  const all = await page.autoPagingToArray({ limit: 100 });
  const got = await Snapshot.get(snapA.id);
  const byName = await sb.snapshots.get('second');
  return {
    mine: mine.map((s) => s.name).sort(),
    pageSize: page.data.length,
    hasMore: page.meta?.hasMore,
    all: all.map((s) => s.name).sort(),
    got: got.name,
    byName: byName.name,
  };
});
await step('fork', async () => {
  const answer = await sb.fork(`${p}-f1`);
  const f1 = await deployed(`${p}-f1`);
  await f1.fs.write('/home/user/fork-only.txt', 'mine');
  await sb.fs.write('/home/user/source-only.txt', 'theirs');
  const echo = await f1.process.exec({ command: 'echo $GREETING', waitForCompletion: true });
  return {
    answer: { ...answer, snapshotId: typeof answer.snapshotId },
    a: await read(f1, '/home/user/a.txt'),
    forkOnlyInSource: await read(sb, '/home/user/fork-only.txt'),
    sourceOnlyInFork: await read(f1, '/home/user/source-only.txt'),
    greeting: echo.stdout.trim(),
    usr: (await f1.process.exec({ command: 'cat /usr/local/share/snap/x', waitForCompletion: true })).stdout,
  };
});
await step('forkSnapshot', async () => {
  const answer = await snapA.fork(`${p}-f2`, {
    envs: [
      { name: 'GREETING', value: 'forked' },
      { name: 'EXTRA', value: 'x' },
    ],
  });
  const f2 = await deployed(`${p}-f2`);
  const echo = await f2.process.exec({ command: 'echo $GREETING $EXTRA', waitForCompletion: true });
  return { answer, a: await read(f2, '/home/user/a.txt'), envs: echo.stdout.trim() };
});
await step('application', () => failure(() => sb.fork(`${p}-app`, { targetType: 'application' })));
await step('forkExisting', () => failure(() => sb.fork(`${p}-f1`)));
await step('archive', async () => {
  const f1 = await SandboxInstance.get(`${p}-f1`);
  await f1.archive({ interval: 100 });
  const archived = (await SandboxInstance.get(`${p}-f1`)).status;
  await f1.unarchive({ interval: 100 });
  const back = await SandboxInstance.get(`${p}-f1`);
  return {
    archived,
    status: back.status,
    forkOnly: await read(back, '/home/user/fork-only.txt'),
    a: await read(back, '/home/user/a.txt'),
  };
});
await step('sourceDeleted', async () => {
  await SandboxInstance.delete(src);
  const snap = await Snapshot.get(snapA.id);
  await snap.fork(`${p}-f3`);
  const f3 = await deployed(`${p}-f3`);
  return { deleted: snap.source.deleted, a: await read(f3, '/home/user/a.txt') };
});
await step('delete', async () => {
  await Snapshot.delete(snapA.id);
  return { after: await failure(() => Snapshot.get(snapA.id)) };
});
for (const n of ['f1', 'f2', 'f3']) await SandboxInstance.delete(`${p}-${n}`).catch(() => {});
console.log(`RESULT ${JSON.stringify(out)}`);
