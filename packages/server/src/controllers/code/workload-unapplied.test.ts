import assert from 'node:assert/strict';
import { test } from 'node:test';
import { unappliedWorkloadFields, unappliedWorkloadNote } from './workload-unapplied.js';

test('an agent spec with nothing unhonoured gets no note', () => {
  const spec = {
    runtime: { memory: 512, timeout: 900, maxScale: 1 },
    // Mounted into every replica (decision 034).
    volumes: [{ name: 'data', mountPath: '/data' }],
    revision: { stickySessionTtl: 60 },
    triggers: [
      { id: 'a', type: 'http-async', configuration: {} },
      { id: 'custom', type: 'http', configuration: { path: 'my/agent' } },
      { id: 'later', type: 'http-async', configuration: { path: 'my/agent/async' } },
    ],
  };
  assert.deepEqual(unappliedWorkloadFields('Agent', spec), []);
  assert.equal(unappliedWorkloadNote('Agent', spec), '');
  assert.deepEqual(unappliedWorkloadFields('Function', spec), []);
});

test('stored-but-unhonoured agent fields are each named', () => {
  const spec = {
    policies: ['eu-only'],
    triggers: [
      { id: 'nightly', type: 'schedule', configuration: { schedule: '0 0 * * *' } },
      { id: 'hourly', type: 'cron', configuration: { schedule: '0 * * * *', path: 'x/cron' } },
    ],
    integrationConnections: ['gh'],
  };
  assert.deepEqual(unappliedWorkloadFields('Agent', spec), ['triggers[hourly].configuration.path']);
  assert.match(unappliedWorkloadNote('Agent', spec), /^; not applied yet: triggers\[hourly\]/);
  assert.deepEqual(unappliedWorkloadFields('Function', { triggers: spec.triggers.slice(0, 1) }), [
    'triggers[nightly] (schedule)',
  ]);
});

test('a job honours its own schedule triggers, timeout and policies', () => {
  const spec = {
    policies: ['eu-only'],
    triggers: [{ id: 'nightly', type: 'schedule', configuration: { schedule: '0 0 * * *' } }],
    runtime: { timeout: 60 },
  };
  assert.deepEqual(unappliedWorkloadFields('Job', spec), []);
});
