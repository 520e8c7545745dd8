// Revisions and traffic on real replicas: each deploy is a revision, and a canary takes its share of requests (the
// split measured over many requests). Pinning, promoting and rolling back are in revisions.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { useRevisionAgent } from './revision-support.js';

/**
 * Requests of the split check, the share the canary gets, and the tolerance: the split is drawn at random per request,
 * so over 4,000 requests the canary's share has a standard deviation of 0.63 points, and 2.5 points is four of them.
 */
const REQUESTS = 4_000;
const CANARY_PERCENT = 20;
const TOLERANCE = 2.5;

describe('revisions and traffic', () => {
  const { server, deployVersion, versions, setRevision } = useRevisionAgent();

  it('each deploy is a revision; a canary takes its share of the requests', async () => {
    const v1 = (await deployVersion('v1')).agent.activeRevision;
    const o2 = (await deployVersion('v2')).agent;
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
      Math.abs(share - CANARY_PERCENT) <= TOLERANCE,
      `canary share ${share}% (expected ${CANARY_PERCENT} ± ${TOLERANCE})`,
    );
    assert.equal((split.get('v1') ?? 0) + (split.get('v2') ?? 0), REQUESTS);
    const events = (await (await server().api('/agents/rev-agent')).json()).events.map((e: any) => e.message);
    assert.ok(
      events.some((m: string) => m.includes(`canary ${v2} at ${CANARY_PERCENT}%`)),
      events.join('\n'),
    );
  });
});
