// The agent commands of the `berth` CLI on real replicas: deploy streams the build log as it is written, run calls
// the agent through the gateway, logs prints the replicas' output and logs --build the build's, deploy --traffic ships a canary, get revisions
// lists both and rollback gives an older revision all traffic.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { berth, berthIntoHead } from '../berth-cli.js';
import { type SandboxServer, startSandboxServer } from '../sandboxes/support.js';

const TEMPLATE = join(import.meta.dirname, '../../../../templates/agent-python');
/** A line the Python template's build writes (builds/build-script.ts). */
const BUILD_LINE = /no requirements: the standard library only/;

describe('berth CLI for agents', () => {
  let s: SandboxServer;
  let dir: string;
  const agent = async () => (await (await s.api('/agents/cli-agent')).json()) as any;
  const setVersion = (v: string) =>
    writeFileSync(
      join(dir, 'main.py'),
      readFileSync(join(TEMPLATE, 'main.py'), 'utf8').replace(
        '"turn": len(history) + 1,',
        `"turn": len(history) + 1, "version": ${JSON.stringify(v)},`,
      ),
    );
  before(async () => {
    s = await startSandboxServer();
    dir = mkdtempSync(join(tmpdir(), 'berth-cli-agent-'));
    cpSync(TEMPLATE, dir, { recursive: true });
    writeFileSync(join(dir, 'berth.toml'), 'name = "cli-agent"\n[runtime]\nmemory = 256\n');
  });
  after(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  let v1 = '';
  let v2 = '';
  it('deploy streams the build log; run answers through the gateway; logs print replica and build output', async () => {
    setVersion('v1');
    const d1 = await berth(s, ['deploy', dir]);
    assert.equal(d1.code, 0, d1.out);
    // In a pipe: one line per phase stamped with the time since the start, the build log, then the outcome.
    const lines = d1.stderr.split('\n');
    const building = lines.findIndex((l) => /^\[\s*[\d.]+s\] building$/.test(l));
    const logged = lines.findIndex((l) => BUILD_LINE.test(l));
    const deployed = lines.findIndex((l) => /^agent\/cli-agent DEPLOYED in /.test(l));
    assert.ok(
      building >= 0 && logged > building && deployed > logged,
      `build log between the phases:\n${d1.out}`,
    );
    assert.ok(!d1.out.includes('\u001b'), 'no escape code in a pipe');
    v1 = (await agent()).activeRevision;

    const run = await berth(s, ['run', 'agent', 'cli-agent', '--data', '{"inputs":"hi"}', '--thread', 't1']);
    assert.equal(run.code, 0, run.out);
    const answer = JSON.parse(run.stdout);
    assert.equal(answer.output, 'HI');
    assert.equal(answer.version, 'v1');

    const out = await berth(s, ['logs', 'agent', 'cli-agent']);
    assert.equal(out.code, 0, out.out);
    assert.match(
      out.stdout,
      /^\[wl-[^\]]+\] agent listening on http:/m,
      'the replica output, tagged by replica',
    );

    const bad = await berth(s, ['run', 'agent', 'no-such-agent', '--data', '{}']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /not found/);

    const log = await berth(s, ['logs', 'agent', 'cli-agent', '--build']);
    assert.equal(log.code, 0, log.out);
    assert.match(log.stdout, BUILD_LINE);
    const followed = await berth(s, ['logs', 'agent', 'cli-agent', '--build', v1, '-f']);
    assert.equal(followed.code, 0, followed.out);
    assert.match(followed.stdout, BUILD_LINE, 'a finished build followed prints its log and ends');
  });

  it('deploy --traffic ships the new revision as a canary; get revisions lists both', async () => {
    setVersion('v2');
    const d2 = await berth(s, ['deploy', dir, '--traffic', '30']);
    assert.equal(d2.code, 0, d2.out);
    assert.match(d2.stderr, /takes 30% \(canary\)/);
    const o2 = await agent();
    assert.equal(o2.activeRevision, v1, 'the serving revision stays active');
    assert.notEqual(o2.canaryRevision, v1);
    assert.equal(o2.spec.revision.canaryPercent, 30);
    v2 = o2.canaryRevision;

    const revs = await berth(s, ['get', 'revisions', 'agent', 'cli-agent']);
    assert.equal(revs.code, 0, revs.out);
    assert.match(revs.stdout, /^REVISION\s+TRAFFIC\s+AGE\s+START\n/);
    assert.match(revs.stdout, new RegExp(`^${v2}\\s+30%\\s`, 'm'));
    assert.match(revs.stdout, new RegExp(`^${v1}\\s+70%\\s`, 'm'));
    const head = await berthIntoHead(s, ['get', 'revisions', 'agent', 'cli-agent'], 1);
    assert.equal(head.code, 0, head.stderr);
    assert.equal(head.stderr, '', 'a reader that stops early ends it quietly');
    const agentRow = (await berth(s, ['get', 'agent', 'cli-agent'])).stdout.split('\n');
    assert.deepEqual(agentRow[0].split(/\s{2,}/), [
      'NAME',
      'STATUS',
      'REVISION',
      'CANARY',
      'REPLICAS',
      'URL',
      'AGE',
      'REASON',
    ]);
    assert.match(
      agentRow[1],
      new RegExp(`^cli-agent\\s+DEPLOYED\\s+${v1.slice(0, 12)}\\s+${v2.slice(0, 12)} 30%\\s+\\d+\\s+http`),
    );
  });

  it('rollback gives the named revision all traffic and drops the canary', async () => {
    const rb = await berth(s, ['rollback', 'agent', 'cli-agent', v2]);
    assert.equal(rb.code, 0, rb.out);
    const o3 = await agent();
    assert.equal(o3.activeRevision, v2);
    assert.equal(o3.canaryRevision, undefined);
    const after = await berth(s, ['run', 'agent', 'cli-agent', '--data', '{"inputs":"x"}']);
    assert.equal(JSON.parse(after.stdout).version, 'v2', 'the rolled-to revision answers every request');
  });
});
