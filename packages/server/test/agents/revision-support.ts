// The agent both revision test files deploy: the Python template on a real server, answering a `version` in every
// reply so a test can tell which revision served a request, with helpers to deploy a version, count the versions
// that answer and set `spec.revision`.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { type SandboxServer, startSandboxServer } from '../sandboxes/support.js';
import { berth } from '../berth-cli.js';

const REPO = join(import.meta.dirname, '../../../..');
const CONCURRENCY = 16;
const NAME = 'rev-agent';

export interface RevisionAgent {
  server(): SandboxServer;
  /** Deploys the template answering `version`; returns the agent as it then is and the CLI's run. */
  deployVersion(
    version: string,
    exitCode?: number,
  ): Promise<{ agent: any; run: Awaited<ReturnType<typeof berth>> }>;
  /** Sends `n` requests, 16 at a time: how many each version answered. */
  versions(n: number): Promise<Map<string, number>>;
  /** Sets `spec.revision` and waits until the agent is DEPLOYED with that active revision. */
  setRevision(revision: Record<string, unknown>): Promise<any>;
}

/** Starts the server and the agent's folder before the file's tests and removes them after. */
export function useRevisionAgent(): RevisionAgent {
  let s: SandboxServer;
  let dir: string;
  const agent = async () => (await s.api(`/agents/${NAME}`)).json() as Promise<any>;
  before(async () => {
    s = await startSandboxServer();
    dir = mkdtempSync(join(tmpdir(), 'berth-rev-'));
    cpSync(join(REPO, 'templates/agent-python'), dir, { recursive: true });
    writeFileSync(join(dir, 'berth.toml'), `name = "${NAME}"\n[runtime]\nmemory = 256\n`);
  });
  after(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    server: () => s,
    async deployVersion(version, exitCode = 0) {
      const main = readFileSync(join(REPO, 'templates/agent-python/main.py'), 'utf8').replace(
        '"turn": len(history) + 1,',
        `"turn": len(history) + 1, "version": ${JSON.stringify(version)},`,
      );
      writeFileSync(join(dir, 'main.py'), main);
      const run = await berth(s, ['deploy', dir]);
      assert.equal(run.code, exitCode, run.out);
      return { agent: await agent(), run };
    },
    async versions(n) {
      const seen = new Map<string, number>();
      let next = 0;
      const worker = async () => {
        while (next < n) {
          next++;
          const res = await s.run(`${s.url}/run/default/agents/${NAME}`, {
            method: 'POST',
            json: { inputs: 'x' },
          });
          const v = (await res.json()).version;
          seen.set(v, (seen.get(v) ?? 0) + 1);
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
      return seen;
    },
    async setRevision(revision) {
      const cur = await agent();
      const res = await s.api(`/agents/${NAME}`, {
        method: 'PUT',
        json: { metadata: { name: NAME }, spec: { ...cur.spec, revision } },
      });
      assert.equal(res.status, 200);
      for (let i = 0; i < 400; i++) {
        const o = await agent();
        if (o.status === 'DEPLOYED' && o.activeRevision === (revision.active ?? o.activeRevision)) return o;
        if (o.status === 'FAILED') assert.fail(JSON.stringify(o.events.at(-1)));
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.fail('never DEPLOYED');
    },
  };
}
