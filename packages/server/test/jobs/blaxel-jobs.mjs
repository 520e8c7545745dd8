// Drives a job with the unmodified @blaxel/core pointed at Berth (env from the parent test): blJob(name).run,
// createExecution with env and memory overrides, waitForExecution, getExecution, listExecutions with
// auto-paging; prints one `RESULT <json>` line.
import { blJob } from '@blaxel/core';

const job = blJob(process.env.JOB_NAME);
const wait = { interval: 300, maxWait: 100_000 };
const first = await job.run([{ name: 'sdk-a' }, { name: 'sdk-b' }]);
const firstDone = await job.waitForExecution(first, wait);
const second = await job.createExecution({
  tasks: [{ env: 'GREETING' }],
  env: { GREETING: 'from-the-override' },
  memory: 384,
});
const secondDone = await job.waitForExecution(second, wait);
const got = await job.getExecution(second);
const listed = await (await job.listExecutions()).autoPagingToArray({ limit: 1000 });
console.log(
  `RESULT ${JSON.stringify({
    first,
    firstStatus: firstDone.status,
    firstSuccess: firstDone.stats?.success,
    second,
    secondStatus: secondDone.status,
    memoryOverride: got.spec?.memoryOverride,
    envOverride: got.spec?.envOverride,
    listed: listed.map((e) => e.metadata?.id),
  })}`,
);
process.exit(0);
