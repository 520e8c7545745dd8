// A job's schedule trigger fires by starting an execution with the trigger's tasks (controllers/code/trigger-schedules.ts
// decides when); the execution id is the firing id, so one firing starts at most one execution.
import type { Resources } from '../../store/resources.js';
import { createExecution } from './job-create.js';
import type { JobRunner } from './job-runner.js';
import { JOB_SCHEDULE_KIND } from '../../kinds/job.js';
import type { ScheduledKind } from '../code/trigger-schedules.js';

export function jobScheduling(resources: Resources, runner: JobRunner, now: () => number): ScheduledKind {
  return {
    stateKind: JOB_SCHEDULE_KIND,
    running: (j, prefix) => runner.running(j.workspace, j.name).some((id) => id.startsWith(prefix)),
    async fire(j, t, firingId) {
      const body = { tasks: t.configuration.tasks ?? [{}], executionId: firingId };
      await createExecution({ resources, runner, now }, j.workspace, j, body);
    },
  };
}
