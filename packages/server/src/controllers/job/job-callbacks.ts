// When an execution ends, each enabled trigger of its job with a `callbackUrl` is told: POST {executionId, job,
// status, stats, startedAt, finishedAt}, signed as DESIGN.md §4 and delivered (persisted, retried `retry` times with
// backoff, private targets refused) by controllers/code/callbacks.ts, the one callback path.
import type { Logger } from 'pino';
import type { Resources } from '../../store/resources.js';
import type { Callbacks } from '../code/callbacks.js';
import type { ExecutionRecord } from './job-store.js';

export interface JobCallbackDeps {
  resources: Resources;
  callbacks: Callbacks;
  logger?: Logger;
}

export class JobCallbacks {
  constructor(private readonly deps: JobCallbackDeps) {}

  /** Queues the execution's callbacks; failures are logged, never thrown. */
  notify(workspace: string, rec: ExecutionRecord, stats: Record<string, number>) {
    void this.send(workspace, rec, stats).catch((err) =>
      this.deps.logger?.warn({ err, execution: rec.id }, 'job callbacks failed'),
    );
  }

  private async send(workspace: string, rec: ExecutionRecord, stats: Record<string, number>) {
    const { resources } = this.deps;
    const job = await resources.store.get({ kind: 'Job', workspace, parent: '', name: rec.job });
    if (!job) return;
    const spec = resources.openSecrets(resources.kind('Job'), job.body.spec ?? {});
    const body = JSON.stringify({
      executionId: rec.id,
      job: rec.job,
      status: rec.status,
      stats,
      startedAt: rec.startedAt ?? rec.createdAt,
      finishedAt: rec.completedAt,
    });
    for (const t of spec.triggers ?? []) {
      const c = t.configuration ?? {};
      if (t.enabled === false || !c.callbackUrl || !c.callbackSecret) continue;
      await this.deps.callbacks.send({
        workspace,
        owner: `Job/${rec.job}`,
        id: `msg_${rec.id}_${t.id ?? 'trigger'}`,
        url: c.callbackUrl,
        secret: c.callbackSecret,
        body,
        retry: c.retry,
      });
    }
  }
}
