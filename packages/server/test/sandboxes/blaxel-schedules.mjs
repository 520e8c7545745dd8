// Sandbox schedules through the unmodified @blaxel/core SDK: create (cron, at, sleep), list with pages and a type
// filter, get, update, delete, a schedule that fires (and, a one-off, is then removed), and the workspace-wide
// lists and metrics. Prints one `RESULT <json>` line.
import {
  getSandboxScheduleMetrics,
  listScheduleExecutions,
  listSchedules,
  SandboxInstance,
} from '@blaxel/core';

const name = process.env.SANDBOX_NAME;
const memory = Number(process.env.SANDBOX_MEMORY);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const out = {};

const sb = await SandboxInstance.create({ name, memory });
const cron = await sb.schedules.create({
  id: 'nightly',
  type: 'cron',
  value: '0 3 * * *',
  input: { command: 'echo nightly' },
});
const at = await sb.schedules.create({
  type: 'at',
  value: '2030-07-01T09:00:00Z',
  input: { command: 'echo later', env: { TOKEN: 's3cret' } },
});
const fires = await sb.schedules.create({
  id: 'soon',
  type: 'sleep',
  value: '1s',
  input: { command: 'echo fired-$WHO', name: 'soon-proc', env: { WHO: 'schedule' } },
});
out.created = {
  cron: { id: cron.id, type: cron.type, value: cron.value },
  atId: at.id,
  atEnv: at.input.env,
  fires: { type: fires.type },
};
out.sleepResolved = Math.abs(Date.parse(fires.value) - Date.now()) < 5_000;

const page = await sb.schedules.list({ limit: 2 });
const ids = [];
for await (const s of page) ids.push(s.id);
out.list = { firstPage: page.data.length, hasMore: page.hasMore, ids: ids.sort() };
out.cronOnly = (await (await sb.schedules.list({ type: 'cron' })).autoPagingToArray({ limit: 10 })).map(
  (s) => s.id,
);
out.got = (await sb.schedules.get('nightly')).value;
const updated = await sb.schedules.update('nightly', {
  type: 'cron',
  value: '30 4 * * 1-5',
  input: { command: 'echo weekdays' },
});
out.updated = { value: updated.value, command: updated.input.command };
await sb.schedules.delete(at.id);
try {
  await sb.schedules.get(at.id);
  out.afterDelete = 'found';
} catch (e) {
  out.afterDelete = e.code ?? e.status;
}
try {
  await sb.schedules.create({ type: 'cron', value: 'every day', input: { command: 'true' } });
  out.badCron = 'accepted';
} catch (e) {
  out.badCron = e.code ?? e.status;
}

let executions = [];
for (let i = 0; i < 100 && !executions.length; i++) {
  await sleep(100);
  executions = (await sb.schedules.executions()).data;
}
out.execution = executions[0] && {
  scheduleId: executions[0].scheduleId,
  status: executions[0].status,
  statusCode: executions[0].statusCode,
  processName: executions[0].processName,
};
if (executions[0]) {
  await sb.process.wait(executions[0].processName).catch(() => undefined);
  out.firedLogs = await sb.process.logs(executions[0].processName, 'stdout');
}
// A one-off that fired is no longer listed (the service removes it); the workspace-wide lists and the metrics.
try {
  await sb.schedules.get('soon');
  out.soonAfterFiring = 'found';
} catch (e) {
  out.soonAfterFiring = e.code ?? e.status;
}
const all = await listSchedules({ query: { sandbox: name }, throwOnError: true });
out.workspaceSchedules = all.data.data.map((s) => `${s.sandbox}/${s.id}`);
const fired = await listScheduleExecutions({ query: { schedule: 'soon' }, throwOnError: true });
out.workspaceExecutions = fired.data.data.map((e) => `${e.sandbox}/${e.scheduleId}/${e.status}`);
const metrics = (await getSandboxScheduleMetrics({ throwOnError: true })).data;
out.metrics = {
  executions: metrics.executions,
  succeeded: metrics.executionsByStatus.succeeded,
  schedules: metrics.schedules,
};
console.log(`RESULT ${JSON.stringify(out)}`);
