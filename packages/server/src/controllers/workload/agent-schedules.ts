// An agent's schedule trigger fires by sending each of `configuration.tasks` to the agent as a POST body, one after
// the other, through the same path a caller's request takes (the gateway's replica choice and scale from zero).
// The firing runs in the background; the next firing of the same trigger is skipped while it does (no overlap).
import type { Logger } from 'pino';
import { AGENT_SCHEDULE_KIND } from '../../kinds/agent.js';
import type { ScheduledKind } from '../code/trigger-schedules.js';

/** Sends one body to a deployed agent; answers its status code, or the reason it could not be reached. */
export type InvokeAgent = (
  workspace: string,
  agent: string,
  body: Buffer,
) => Promise<{ statusCode?: number; error?: string }>;

export function agentScheduling(invoke: InvokeAgent, logger?: Logger): ScheduledKind {
  const inFlight = new Set<string>();
  return {
    stateKind: AGENT_SCHEDULE_KIND,
    running: (a, prefix) => inFlight.has(`${a.workspace}/${a.name}/${prefix}`),
    async fire(a, t, firingId) {
      const prefix = firingId.slice(0, firingId.lastIndexOf('-') + 1);
      const slot = `${a.workspace}/${a.name}/${prefix}`;
      const tasks: unknown[] = Array.isArray(t.configuration.tasks) ? t.configuration.tasks : [{}];
      inFlight.add(slot);
      void (async () => {
        try {
          for (const [i, task] of tasks.entries()) {
            const out = await invoke(a.workspace, a.name, Buffer.from(JSON.stringify(task ?? {})));
            const fields = { agent: a.name, trigger: t.id, firing: firingId, task: i, ...out };
            if (out.error || (out.statusCode ?? 500) >= 400)
              logger?.warn(fields, 'scheduled agent task failed');
            else logger?.info(fields, 'scheduled agent task done');
          }
        } finally {
          inFlight.delete(slot);
        }
      })();
    },
  };
}
