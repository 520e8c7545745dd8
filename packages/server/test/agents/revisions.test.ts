// Revisions and traffic on real replicas: a deploy while the active revision is pinned to an older one goes in at 0%,
// and `berth deploy` says so (exit 3, with the command that promotes it); promoting and rolling back are setting
// `active`, and promoting what serves already changes nothing. The canary split is in revisions-canary.test.ts.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type SandboxServer, startSandboxServer } from '../sandboxes/support.js';
import { berth } from '../berth-cli.js';

const REPO = join(import.meta.dirname, '../../../..');
const CONCURRENCY = 16;

describe('revisions and traffic', () => {
  let s: SandboxServer;
  let dir: string;
  /** The last deploy's run. */
  let last: Awaited<ReturnType<typeof berth>>;
  const url = () => `${s.url}/run/default/agents/rev-agent`;
  /** Deploys the Python template answering `version` in every reply; returns the agent as it then is. */
  async function deployVersion(version: string, exitCode = 0) {
    const main = readFileSync(join(REPO, 'templates/agent-python/main.py'), 'utf8').replace(
      '"turn": len(history) + 1,',
      `"turn": len(history) + 1, "version": ${JSON.stringify(version)},`,
    );
    writeFileSync(join(dir, 'main.py'), main);
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, exitCode, r.out);
    last = r;
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

  it('a deploy while pinned stays at 0% and says how to promote it; promote and rollback set the active revision', async () => {
    const v1 = (await deployVersion('v1')).activeRevision;
    const v2 = (await deployVersion('v2')).activeRevision;
    assert.notEqual(v1, v2);
    assert.match(last.stderr, new RegExp(`DEPLOYED in .*: revision ${v2} takes all traffic`));
    assert.match(
      last.stdout,
      /^http:\/\/\S+\/run\/default\/agents\/rev-agent\n$/,
      'stdout: the address alone',
    );

    // Pinned to v1 (no canary): a new deploy is kept as a revision but takes no traffic, and the CLI says so.
    await setRevision({ active: v1 });
    const o3 = await deployVersion('v3', 3);
    assert.equal(o3.activeRevision, v1);
    assert.equal(o3.revisions.length, 3);
    const v3 = o3.revisions[0].id;
    assert.match(last.stderr, new RegExp(`revision ${v3} takes no traffic: spec.revision.active pins ${v1}`));
    assert.match(last.stderr, new RegExp(`berth promote agent rev-agent ${v3}`));
    assert.deepEqual([...(await versions(50)).keys()], ['v1']);

    // Promoting (to the newest, by default) and rolling back are the same call; promoting what serves is a no-op.
    const promoted = await berth(s, ['promote', 'agent', 'rev-agent']);
    assert.equal(promoted.code, 0, promoted.out);
    assert.equal(promoted.stdout, `revision ${v3} takes all traffic\n`);
    assert.deepEqual([...(await versions(20)).keys()], ['v3']);
    const again = await berth(s, ['promote', 'agent', 'rev-agent', v3]);
    assert.equal(again.code, 0, again.out);
    assert.match(again.stderr, new RegExp(`revision ${v3} takes all traffic already: nothing changed`));
    const back = await berth(s, ['rollback', 'agent', 'rev-agent', v1]);
    assert.equal(back.code, 0, back.out);
    assert.deepEqual([...(await versions(20)).keys()], ['v1']);
  });
});
