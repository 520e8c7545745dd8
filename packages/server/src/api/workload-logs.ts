// The output of an agent's or function's replicas: `GET /v0/<kind>/{name}/logs` prints each running replica's
// kept output (its start command's stdout and stderr), every line prefixed `[<replica id>] `; `?follow=true` then
// streams new lines until the client goes or every followed replica ends. A replica in standby (frozen) cannot
// answer: it is named with a note instead of holding the request. Replicas started after a follow began are not
// joined to it (follow again). Build output is at .../revisions/{rev}/logs.
import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { requireRole } from '../auth/require-role.js';
import { APP_PROCESS, type Replica, type ReplicaSet } from '../controllers/workload/replicas.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { DaemonClient } from '../sandbox-api/client.js';
import type { Resources } from '../store/resources.js';

/** Longest one replica's daemon may take to answer before it is skipped: a daemon answers at once unless frozen. */
const REPLICA_ANSWER_MS = 5_000;

export interface WorkloadLogDeps {
  resources: Resources;
  replicas: ReplicaSet;
  driver: RuntimeDriver;
}

/** Prefixes each line; a partial line waits for its end, so two replicas' lines never mix. */
function prefixer(prefix: string) {
  let held = '';
  return {
    push: (text: string) => {
      held += text;
      const cut = held.lastIndexOf('\n') + 1;
      const out = held.slice(0, cut).replace(/^(?=.)/gm, prefix);
      held = held.slice(cut);
      return out;
    },
    end: () => (held ? `${prefix}${held}\n` : ''),
  };
}

export function registerWorkloadLogRoutes(
  app: FastifyInstance,
  { resources, replicas, driver }: WorkloadLogDeps,
) {
  for (const [plural, kind] of [
    ['agents', 'Agent'],
    ['functions', 'Function'],
  ] as const) {
    app.get(`/${plural}/:name/logs`, async (req, reply) => {
      const a = requireRole(req, 'viewer');
      const name = (req.params as { name: string }).name;
      await resources.mustGet(resources.kind(kind), a.workspace, [], name);
      const follow = (req.query as { follow?: string }).follow === 'true';
      const w = replicas.get(a.workspace, kind, name);
      const all = [...(w?.replicas ?? []), ...(w?.canary?.w.replicas ?? [])].filter((r) => !r.gone);
      const out = new PassThrough();
      const ended = new AbortController();
      req.raw.on('close', () => ended.abort());
      reply.type('text/plain; charset=utf-8').header('cache-control', 'no-cache');
      if (!all.length) out.write('no replica runs now (it starts on the next request)\n');
      const one = async (r: Replica) => {
        const tag = prefixer(`[${r.id}] `);
        if ((await driver.inspect(r.id))?.state === 'frozen') {
          out.write(`[${r.id}] (standby: its output shows once a request wakes it)\n`);
          return;
        }
        try {
          const daemon = DaemonClient.at(r.info.socketPath);
          if (!follow) {
            const kept = await daemon.logs(APP_PROCESS, REPLICA_ANSWER_MS, ended.signal);
            if (kept) out.write(tag.push(kept.logs ?? '') + tag.end());
            return;
          }
          await daemon.logStream(APP_PROCESS, (text) => out.write(tag.push(text)), ended.signal, {
            timeoutMs: REPLICA_ANSWER_MS,
          });
          out.write(tag.end());
        } catch {
          // The replica went (scaled in, redeployed) or the client left: nothing more from it.
        }
      };
      void Promise.all(all.map(one)).finally(() => out.end());
      return out;
    });
  }
}
