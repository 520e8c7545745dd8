// A data dir from before builds were kept per workspace (decision 036): an agent DEPLOYED on an app under the global
// `builds/apps/<key>` (key without the workspace), its source under `builds/code`, a replica of that revision still
// running. The upgraded server trusts none of it: the replica is removed, the agent is built again from its own
// source under its workspace and serves on; the global folders are gone.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { replicaIdPrefix, workloadKey } from '../../src/controllers/workload/replicas.js';
import { SqliteStore } from '../../src/store/sqlite.js';
import { berth } from '../berth-cli.js';
import { inspectingDriver, removeAllSandboxes, startSandboxServer } from '../sandboxes/support.js';
import { removeDirLater } from '../../src/test-support/sandboxes.js';

const TEMPLATES = join(import.meta.dirname, '../../../../templates');
const sha = (s: string) => createHash('sha256').update(s).digest('hex');

test('an agent deployed on a build from before builds were per workspace is built again at start and serves on', {
  timeout: 300_000,
}, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-legacy-builds-'));
  const work = mkdtempSync(join(tmpdir(), 'berth-legacy-builds-src-'));
  try {
    const first = await startSandboxServer({}, dataDir);
    const dir = join(work, 'py');
    cpSync(join(TEMPLATES, 'agent-python'), dir, { recursive: true });
    writeFileSync(join(dir, 'berth.toml'), 'type = "agent"\nname = "py"\n[runtime]\nmemory = 256\n');
    const d = await berth(first, ['deploy', dir]);
    assert.equal(d.code, 0, d.out);
    await first.close();

    // The same deploy as the earlier layout kept it.
    const builds = join(dataDir, 'builds');
    const ws = join(builds, 'workspaces', 'default');
    const store = new SqliteStore(join(dataDir, 'berth.db'));
    const key = { kind: 'Agent', workspace: 'default', parent: '', name: 'py' };
    const o = await store.get(key);
    assert.ok(o);
    const rev = o.body.revisions[0];
    const digest: string = o.body.source.digest;
    const legacyKey = sha(`1\0${digest}`).slice(0, 32);
    const legacyRev = sha(JSON.stringify([legacyKey, rev.start])).slice(0, 12);
    for (const d of ['apps', 'logs', 'code', 'deps/default']) mkdirSync(join(builds, d), { recursive: true });
    renameSync(join(ws, 'apps', rev.app), join(builds, 'apps', legacyKey));
    renameSync(join(ws, 'apps', `${rev.app}.json`), join(builds, 'apps', `${legacyKey}.json`));
    renameSync(join(ws, 'logs', `${rev.app}.log`), join(builds, 'logs', `${legacyKey}.log`));
    const zip = `${digest.slice('sha256:'.length)}.zip`;
    renameSync(join(ws, 'code', zip), join(builds, 'code', zip));
    rmSync(ws, { recursive: true });
    const legacy = { ...rev, id: legacyRev, app: legacyKey };
    await store.write([
      {
        op: 'update',
        key,
        body: { ...o.body, revisions: [legacy], activeRevision: legacyRev },
        expectVersion: o.resourceVersion,
      },
    ]);
    await store.close();
    // A replica of the legacy revision, as the earlier server left it running.
    const legacyReplica = `${replicaIdPrefix(workloadKey('default', 'Agent', 'py'), legacyRev)}1`;
    const driver = await inspectingDriver(dataDir);
    await driver.ensure(legacyReplica, {
      memoryMb: 128,
      pidsMax: 64,
      cpuShares: 64,
      diskMb: 64,
      envs: {},
      image: '',
      volumes: [{ hostPath: join(builds, 'apps', legacyKey), mountPath: '/app', readOnly: true }],
    });
    await driver.close();

    const second = await startSandboxServer({}, dataDir);
    try {
      let now: any;
      for (let i = 0; i < 1200; i++) {
        now = await (await second.api('/agents/py')).json();
        if (now.status === 'DEPLOYED' && now.activeRevision !== legacyRev) break;
        if (now.status === 'FAILED') assert.fail(JSON.stringify(now.events.at(-1)));
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(now.status, 'DEPLOYED');
      assert.notEqual(now.activeRevision, legacyRev, 'a new revision, built at start');
      assert.ok(
        now.events.some((e: any) => e.status === 'BUILDING'),
        'the agent was built again, visibly',
      );
      const res = await fetch(`${second.url}/run/default/agents/py`, {
        method: 'POST',
        headers: { authorization: `Bearer ${second.adminKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ inputs: 'after the upgrade' }),
      });
      assert.equal(res.status, 200, await res.text());
      const look = await inspectingDriver(dataDir);
      const ids = (await look.list()).map((i) => i.id);
      await look.close();
      assert.ok(!ids.includes(legacyReplica), 'the legacy replica was not re-adopted');
      for (const d of ['apps', 'logs', 'code', 'deps'])
        assert.equal(existsSync(join(builds, d)), false, `builds/${d} is gone`);
      assert.ok(existsSync(join(ws, 'code', zip)), 'the source moved into its workspace');
      assert.ok(readdirSync(join(ws, 'apps')).includes(now.revisions[0].app));
    } finally {
      await second.close();
    }
  } finally {
    await removeAllSandboxes(dataDir);
    removeDirLater(dataDir);
    rmSync(work, { recursive: true, force: true });
  }
});
