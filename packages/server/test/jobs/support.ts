// Shared by the job end-to-end tests: deploy the catalog's job template with `berth deploy` (dependencies from the
// workspace's dependency cache, as a build with network would have left them), start executions, wait for them,
// and count a job's task processes the way the kernel sees them (/proc), never through Berth's own counters.
import assert from 'node:assert/strict';
import { cpSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { seedNodeCache } from '../../src/test-support/dependency-cache.js';
import { berth } from '../berth-cli.js';

export { berth };

export const REPO = join(import.meta.dirname, '../../../..');
export const JOB_TEMPLATE = join(REPO, 'templates/job-typescript');

export interface Target {
  url: string;
  /** The key the helpers act with (a tenant's own key, to act as that tenant). */
  adminKey: string;
  dataDir: string;
  /** The workspace the key acts in, whose dependency cache a deploy seeds (default: `default`). */
  workspace?: string;
}

/** Copies the template to `dir` with the given job settings and deploys it as `name`. */
export async function deployJob(s: Target, dir: string, name: string, runtime: Record<string, number>) {
  cpSync(JOB_TEMPLATE, dir, { recursive: true });
  const lines = Object.entries(runtime).map(([k, v]) => `${k} = ${v}`);
  writeFileSync(join(dir, 'berth.toml'), `type = "job"\nname = "${name}"\n[runtime]\n${lines.join('\n')}\n`);
  seedNodeCache(s.dataDir, s.workspace ?? 'default', dir, REPO);
  const r = await berth(s, ['deploy', dir]);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /DEPLOYED/);
}

export async function api(s: Target, path: string, init: { method?: string; json?: unknown } = {}) {
  const res = await fetch(`${s.url}/v0${path}`, {
    method: init.method ?? 'GET',
    headers: {
      authorization: `Bearer ${s.adminKey}`,
      ...(init.json !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    body: init.json !== undefined ? JSON.stringify(init.json) : undefined,
  });
  const text = await res.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: res.status, body };
}

export async function waitExecution(s: Target, job: string, id: string, limitMs = 110_000) {
  const until = Date.now() + limitMs;
  for (;;) {
    const r = await api(s, `/jobs/${job}/executions/${id}`);
    if (['succeeded', 'failed', 'cancelled'].includes(r.body?.status)) return r.body;
    if (Date.now() > until)
      assert.fail(`execution ${id} still ${r.body?.status}: ${JSON.stringify(r.body?.stats)}`);
    await new Promise((res) => setTimeout(res, 200));
  }
}

/** Host pids of the task processes (`node index.js`) of one execution, found through their environment. */
export function taskProcesses(executionId: string): number[] {
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const cmd = readFileSync(`/proc/${e}/cmdline`, 'utf8');
      if (!cmd.startsWith('node\0index.js')) continue;
      if (readFileSync(`/proc/${e}/environ`, 'utf8').includes(`BL_EXECUTION_ID=${executionId}\0`))
        out.push(Number(e));
    } catch {
      // The process ended while we looked.
    }
  }
  return out;
}
