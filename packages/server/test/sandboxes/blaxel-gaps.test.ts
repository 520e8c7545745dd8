// The unmodified @blaxel/core SDK against the wire gaps its own test suite found: externalId, paged lists, the
// service's region names, runtime.extraArgs, generated process names, sessions, env updates and expiry on read.
// Plus what the SDK cannot send: a sandbox created without an image reports the default one.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runBlaxelScript } from '../../src/test-support/blaxel.js';
import { type SandboxServer, startSandboxServer, TEST_MEMORY_MB } from './support.js';

describe('@blaxel/core on the wire gaps', () => {
  let server: SandboxServer;
  let r: any;
  before(async () => {
    server = await startSandboxServer();
    const stdout = await runBlaxelScript(join(import.meta.dirname, 'blaxel-gaps.mjs'), server, {
      SANDBOX_PREFIX: 'gap',
      SANDBOX_MEMORY: String(TEST_MEMORY_MB),
    });
    const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
    assert.ok(line, `the SDK script printed no result: ${stdout}`);
    r = JSON.parse(line.slice('RESULT '.length));
    const sched = await runBlaxelScript(join(import.meta.dirname, 'blaxel-schedules.mjs'), server, {
      SANDBOX_NAME: 'gap-sched',
      SANDBOX_MEMORY: String(TEST_MEMORY_MB),
    });
    const schedLine = sched.split('\n').find((l) => l.startsWith('RESULT '));
    assert.ok(schedLine, `the schedules script printed no result: ${sched}`);
    r.schedules = JSON.parse(schedLine.slice('RESULT '.length));
  });
  after(() => server?.close());

  it('creates with externalId, a service region name and extraArgs, and reports them', () => {
    assert.deepEqual(r.create, {
      status: 'DEPLOYED',
      externalId: 'ext:gap.1',
      region: 'us-pdx-1',
      extraArgs: { iptables: 'enabled' },
      image: 'blaxel/base-image:latest',
    });
  });

  it('getByExternalId finds the newest live sandbox with it, and answers 404 for an unknown one', () => {
    // gap-a carries the same externalId and was created later.
    assert.equal(r.byExternalId, 'gap-main');
    assert.equal(r.byUnknownExternalId, 404);
    assert.deepEqual(r.listByExternalId, ['gap-a', 'gap-main']);
  });

  it('keeps externalId when an update leaves it out of metadata', () => {
    assert.deepEqual(r.updateMetadataKeepsExternalId, { externalId: 'ext:gap.1', labels: { team: 'sdk' } });
  });

  it('list pages of two, and for-await walks them all', () => {
    assert.equal(r.listAutoPaging.firstPage, 2);
    assert.equal(r.listAutoPaging.hasMore, true);
    assert.deepEqual(r.listAutoPaging.names, ['gap-a', 'gap-b', 'gap-c', 'gap-main']);
  });

  it('keeps extraArgs, says in an event that they are not applied, and refuses a change (422)', () => {
    assert.deepEqual(r.extraArgsOnRead.extraArgs, { iptables: 'enabled' });
    assert.ok(
      r.extraArgsOnRead.events.some((m: string) => /not applied: runtime.extraArgs iptables=enabled/.test(m)),
      JSON.stringify(r.extraArgsOnRead.events),
    );
    assert.equal(r.immutableExtraArgs, 422);
  });

  it('names an unnamed process proc-… and finds it and its logs by that name', () => {
    assert.match(r.execWithoutName.name, /^proc-[0-9a-f]{8}$/);
    assert.equal(r.execWithoutName.logs, 'unnamed\n');
    assert.equal(r.execWithoutName.status, 'completed');
  });

  it('a session (a private preview of port 443) reaches the sandbox API with its token alone', () => {
    const s = r.session;
    assert.ok(!s.error, s.error);
    assert.match(s.url, /\/run\/default\/previews\/gap-main\/session-\d+$/);
    assert.equal(s.exitCode, 0);
    assert.equal(s.logs, 'from-session\n');
    assert.equal(s.read, 'session file');
    assert.equal(s.watched, true);
    assert.equal(s.listed, true);
    assert.equal(s.listedAfterDelete, false);
  });

  it('system.upgrade replaces the daemon in place: a running process finishes on time, a preview stays reachable', () => {
    assert.deepEqual(r.upgrade, {
      message: 'daemon reloaded (its code had not changed)',
      samePid: true,
      statusDuring: 'running',
      previewAfter: 'web-ok',
      final: { status: 'completed', exitCode: 0, logs: 'started\nfinished\n' },
      upgraded: true,
      upgradeCount: 1,
      lastUpgrade: 'completed',
    });
  });

  it('an update of envs restarts the sandbox and answers once it runs: new env, processes and files gone', () => {
    assert.deepEqual(r.envUpdate, {
      status: 'DEPLOYED',
      state: 'RUNNING',
      greeting: 'two',
      file: null,
      sleeperKept: false,
    });
  });

  it('a sandbox past its ttl reads TERMINATED on the next get', () => {
    assert.deepEqual(r.ttlExpiry, { before: 'DEPLOYED', after: 'TERMINATED' });
  });

  it('a sandbox created without an image reports the default image', async () => {
    const res = await server.api('/sandboxes', {
      method: 'POST',
      json: { metadata: { name: 'gap-noimage' }, spec: { runtime: { memory: TEST_MEMORY_MB } } },
    });
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.equal(body.spec.runtime.image, 'blaxel/base-image:latest');
  });

  it('schedules: create cron, at and sleep (resolved to at), list with pages and a type filter, get, update, delete', () => {
    const x = r.schedules;
    assert.deepEqual(x.created.cron, { id: 'nightly', type: 'cron', value: '0 3 * * *' });
    assert.match(x.created.atId, /^sched-[0-9a-f]{8}$/);
    assert.deepEqual(x.created.atEnv, { TOKEN: '********' }, 'schedule envs are masked');
    assert.deepEqual(x.created.fires, { type: 'at' });
    assert.equal(x.sleepResolved, true);
    assert.deepEqual(x.list, {
      firstPage: 2,
      hasMore: true,
      ids: [x.created.atId, 'nightly', 'soon'].sort(),
    });
    assert.deepEqual(x.cronOnly, ['nightly']);
    assert.equal(x.got, '0 3 * * *');
    assert.deepEqual(x.updated, { value: '30 4 * * 1-5', command: 'echo weekdays' });
    assert.equal(x.afterDelete, 404);
    assert.equal(x.badCron, 422);
  });

  it('a schedule fires on time: its command runs in the sandbox, with its envs, and the execution names it', () => {
    const x = r.schedules;
    assert.deepEqual(x.execution, {
      scheduleId: 'soon',
      status: 'succeeded',
      statusCode: 200,
      processName: 'soon-proc',
    });
    assert.equal(x.firedLogs, 'fired-schedule\n');
  });

  it('a one-off that fired is removed; the workspace lists every sandbox’s schedules and firings, and counts them', () => {
    const x = r.schedules;
    assert.equal(x.soonAfterFiring, 404);
    assert.deepEqual(x.workspaceSchedules, ['gap-sched/nightly']);
    assert.deepEqual(x.workspaceExecutions, ['gap-sched/soon/succeeded']);
    assert.deepEqual(x.metrics, { executions: 1, succeeded: 1, schedules: 1 });
  });

  it('refuses an externalId outside 1-64 of [A-Za-z0-9._:-], and an unknown region naming the settings (422)', async () => {
    for (const externalId of ['has space', 'x'.repeat(65), 'slash/no']) {
      const res = await server.api('/sandboxes', {
        method: 'POST',
        json: { metadata: { name: 'gap-badext', externalId }, spec: { runtime: { memory: TEST_MEMORY_MB } } },
      });
      const body = await res.json();
      assert.equal(res.status, 422, JSON.stringify(body));
      assert.equal(body.errors[0].pointer, '/metadata/externalId');
    }
    const res = await server.api('/sandboxes', {
      method: 'POST',
      json: {
        metadata: { name: 'gap-mars' },
        spec: { region: 'mars-1', runtime: { memory: TEST_MEMORY_MB } },
      },
    });
    const body = await res.json();
    assert.equal(res.status, 422);
    assert.match(
      body.errors[0].message,
      /known regions: local, us-pdx-1, .*BERTH_REGIONS and BERTH_REGION_ALIASES/,
    );
  });
});
