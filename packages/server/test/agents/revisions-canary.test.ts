// Revisions and traffic on real replicas: each deploy is a revision, and a canary takes its share of requests (the
// split measured over many requests). Pinning, promoting and rolling back are in revisions.test.ts.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type SandboxServer, startSandboxServer } from '../sandboxes/support.js';
import { berth } from '../berth-cli.js';

const REPO = join(import.meta.dirname, '../../../..');
/** Requests of the split check, and the share the canary gets. */
const REQUESTS = 10_000;
const CANARY_PERCENT = 20;
const CONCURRENCY = 16;

describe('revisions and traffic', () => {
  let s: SandboxServer;
  let dir: string;
  const url = () => `${s.url}/run/default/agents/rev-agent`;
  /** Deploys the Python template answering `version` in every reply; returns the new revision id. */
  async function deployVersion(version: string) {
    const main = readFileSync(join(REPO, 'templates/agent-python/main.py'), 'utf8').replace(
      '"turn": len(history) + 1,',
      `"turn": len(history) + 1, "version": ${JSON.stringify(version)},`,
    );
    writeFileSync(join(dir, 'main.py'), main);
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, 0, r.out);
    return (await (await s.api('/agents/rev-agent')).json()) as any;
  }
  async function versions(n: number): Promise<Map<string, number>> {
    const seen = new Map<string, number>();
    let next = 0;
    const worker = async () => {
      while (next < n) {
        next++;
        const res = await s.run(url(), { method: 'POST', json: { inputs: 'x' } });
        const v = (await res.json()).version;
        seen.set(v, (seen.get(v) ?? 0) + 1);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    return seen;
  }
  async function setRevision(revision: Record<string, unknown>) {
    const cur = await (await s.api('/agents/rev-agent')).json();
    const res = await s.api('/agents/rev-agent', {
      method: 'PUT',
      json: { metadata: { name: 'rev-agent' }, spec: { ...cur.spec, revision } },
    });
    assert.equal(res.status, 200);
    for (let i = 0; i < 400; i++) {
      const o = await (await s.api('/agents/rev-agent')).json();
      if (o.status === 'DEPLOYED' && o.activeRevision === (revision.active ?? o.activeRevision)) return o;
      if (o.status === 'FAILED') assert.fail(JSON.stringify(o.events.at(-1)));
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail('never DEPLOYED');
  }

  before(async () => {
    s = await startSandboxServer();
    dir = mkdtempSync(join(tmpdir(), 'berth-rev-'));
    cpSync(join(REPO, 'templates/agent-python'), dir, { recursive: true });
    writeFileSync(join(dir, 'berth.toml'), 'name = "rev-agent"\n[runtime]\nmemory = 256\n');
  });
  after(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('each deploy is a revision; a canary takes its share of the requests', async () => {
    const v1 = (await deployVersion('v1')).activeRevision;
    const o2 = await deployVersion('v2');
    const v2 = o2.activeRevision;
    assert.notEqual(v1, v2, 'a new deploy became active (the active one was the latest)');
    assert.deepEqual(
      o2.revisions.map((r: any) => r.id),
      [v2, v1],
    );

    await setRevision({ active: v1, canary: v2, canaryPercent: CANARY_PERCENT });
    const split = await versions(REQUESTS);
    const share = ((split.get('v2') ?? 0) / REQUESTS) * 100;
    assert.ok(
      Math.abs(share - CANARY_PERCENT) <= 2,
      `canary share ${share}% (expected ${CANARY_PERCENT} ± 2)`,
    );
    assert.equal((split.get('v1') ?? 0) + (split.get('v2') ?? 0), REQUESTS);
    const events = (await (await s.api('/agents/rev-agent')).json()).events.map((e: any) => e.message);
    assert.ok(
      events.some((m: string) => m.includes(`canary ${v2} at ${CANARY_PERCENT}%`)),
      events.join('\n'),
    );
  });
});
