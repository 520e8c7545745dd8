// Revisions and traffic on real replicas: a deploy while the active revision is pinned to an older one goes in at 0%,
// and `berth deploy` says so (exit 3, with the command that promotes it); promoting and rolling back are setting
// `active`, and promoting what serves already changes nothing. The canary split is in revisions-canary.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { berth } from '../berth-cli.js';
import { useRevisionAgent } from './revision-support.js';

describe('revisions and traffic', () => {
  const { server, deployVersion, versions, setRevision } = useRevisionAgent();

  it('a deploy while pinned stays at 0% and says how to promote it; promote and rollback set the active revision', async () => {
    const s = server();
    const v1 = (await deployVersion('v1')).agent.activeRevision;
    const { agent: o2, run: second } = await deployVersion('v2');
    const v2 = o2.activeRevision;
    assert.notEqual(v1, v2);
    assert.match(second.stderr, new RegExp(`DEPLOYED in .*: revision ${v2} takes all traffic`));
    assert.match(
      second.stdout,
      /^http:\/\/\S+\/run\/default\/agents\/rev-agent\n$/,
      'stdout: the address alone',
    );

    // Pinned to v1 (no canary): a new deploy is kept as a revision but takes no traffic, and the CLI says so.
    await setRevision({ active: v1 });
    const { agent: o3, run: third } = await deployVersion('v3', 3);
    assert.equal(o3.activeRevision, v1);
    assert.equal(o3.revisions.length, 3);
    const v3 = o3.revisions[0].id;
    assert.match(
      third.stderr,
      new RegExp(`revision ${v3} takes no traffic: spec.revision.active pins ${v1}`),
    );
    assert.match(third.stderr, new RegExp(`berth promote agent rev-agent ${v3}`));
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
