// The output of an agent's or function's replicas: `GET /v0/<kind>/{name}/logs` prints each running replica's
// kept output (its start command's stdout and stderr), every line prefixed `[<replica id>] `; `?follow=true` then
// streams new lines until the client goes or every followed replica ends. A replica in standby (frozen) cannot
// answer: it is named with a note instead of holding the request. Replicas started after a follow began are not
// joined to it (follow again). Build output is at .../revisions/{rev}/logs.
import { request } from 'node:http';
import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { requireRole } from '../auth/require-role.js';
import type { Replica, ReplicaSet } from '../controllers/replicas.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { KEEPALIVE_LINE } from '../sandbox-api/schema.js';
import type { Resources } from '../store/resources.js';

/** The replica's process the replica set starts (controllers/replicas.ts). */
const APP_PROCESS = 'app';
/** Longest one replica's daemon may take to answer before it is skipped: a daemon answers at once unless frozen. */
const REPLICA_ANSWER_MS = 5_000;

export interface WorkloadLogDeps {
  resources: Resources;
  replicas: ReplicaSet;
  driver: RuntimeDriver;
}

/** GET over a replica's daemon socket; resolves with the response once its status is known. */
function daemonGet(r: Replica, path: string, signal: AbortSignal) {
  return new Promise<import('node:http').IncomingMessage>((resolve, reject) => {
    const req = request(
      { socketPath: r.info.socketPath, path, method: 'GET', agent: false, signal },
      resolve,
    );
    req.setTimeout(REPLICA_ANSWER_MS, () => req.destroy(new Error('no answer')));
    req.on('error', reject);
    req.end();
  });
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
          const path = `/process/${APP_PROCESS}/logs${follow ? '/stream' : ''}`;
          const res = await daemonGet(r, path, ended.signal);
          res.setEncoding('utf8');
          if (!follow) {
            let text = '';
            for await (const c of res) text += c;
            if (res.statusCode === 200) out.write(tag.push(`${JSON.parse(text).logs ?? ''}`) + tag.end());
            return;
          }
          if (res.statusCode !== 200) return;
          for await (const c of res)
            out.write(
              tag.push((c as string).replaceAll(KEEPALIVE_LINE, '').replace(/^(stdout|stderr):/gm, '')),
            );
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
