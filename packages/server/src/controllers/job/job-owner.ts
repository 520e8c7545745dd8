// Jobs as the owner of their runtime instances (runtime/instances.ts): a task's instance is wanted while the store
// says that task's attempt runs in it (an unfinished execution, the task `running` with that sandbox); the job
// runner re-adopts those at start. Builds of a job's code run again, so none is wanted after a restart.
import type { OwnerRegistration } from '../../runtime/instances.js';
import { EVERY_WORKSPACE, type Store } from '../../store/store.js';
import { isExecutionEnded } from './job-decide.js';
import {
  EXECUTION_KIND,
  type ExecutionRecord,
  TASK_KIND,
  type TaskRecord,
  tasksParent,
} from './job-store.js';
import { TASK_ID_PREFIX } from './job-task.js';

export function jobOwner(store: Store): OwnerRegistration {
  return {
    kinds: ['Job'],
    legacyRole: (id) => (id.startsWith(TASK_ID_PREFIX) ? 'task' : undefined),
    async keep(instances) {
      const live = new Set(instances.filter((i) => i.role === 'task' && i.state !== 'dead').map((i) => i.id));
      if (!live.size) return [];
      const wanted: string[] = [];
      for (const o of await store.list({ workspace: EVERY_WORKSPACE, kind: EXECUTION_KIND })) {
        const rec = o.body as ExecutionRecord;
        if (isExecutionEnded(rec.status)) continue;
        const tasks = await store.list({
          kind: TASK_KIND,
          workspace: o.workspace,
          parent: tasksParent(rec.job, rec.id),
        });
        for (const t of tasks) {
          const task = t.body as TaskRecord;
          if (task.status === 'running' && task.sandbox && live.has(task.sandbox)) wanted.push(task.sandbox);
        }
      }
      return wanted;
    },
  };
}
