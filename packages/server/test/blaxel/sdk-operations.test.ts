// Every control-plane operation of the installed @blaxel/core is routed, or waits for a named issue
// (scripts/sdk-operations.mjs): an operation a newer SDK adds fails here until it is routed or an issue takes it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildOpenApiDocument } from '../../src/api/openapi.js';
import { KINDS } from '../../src/kinds/index.js';
// @ts-expect-error a script of the repository, in plain JavaScript
import { coverage, PENDING, report, sdkOperations, sdkVersion } from '../../scripts/sdk-operations.mjs';

test('every control-plane operation of the installed SDK is routed, or not yet for a named issue', async () => {
  const ops = await sdkOperations();
  assert.ok(ops.length >= 170, `the SDK's generated client was read: ${ops.length} operations`);
  const cov = coverage(ops, buildOpenApiDocument(KINDS));
  console.log(report(cov, sdkVersion()).split('\n').at(-1));
  assert.deepEqual(
    cov.gaps.map((g: { method: string; path: string }) => `${g.method} ${g.path}`),
    [],
    'operations Berth does not route and no issue covers: route them, or name the issue in PENDING',
  );
  assert.deepEqual(cov.stale, [], 'PENDING entries that match no operation of the SDK any more');
  for (const p of PENDING) assert.ok(Number.isInteger(p.issue) && p.why, JSON.stringify(p));
});

test('the coverage reads the document: a path of the same shape is routed whatever its parameter names', () => {
  const doc = { paths: { '/sandboxes/{name}/previews': { get: {} } } };
  const ops = [
    { operationId: 'a', method: 'GET', path: '/sandboxes/{sandboxName}/previews' },
    { operationId: 'b', method: 'POST', path: '/sandboxes/{sandboxName}/previews' },
    { operationId: 'c', method: 'GET', path: '/applications' },
  ];
  const cov = coverage(ops, doc, [{ prefix: '/applications', issue: 31, why: 'an example entry' }]);
  assert.deepEqual(
    cov.rows.map((r: { operationId: string; routed: boolean; pending?: { issue: number } }) => [
      r.operationId,
      r.routed,
      r.pending?.issue,
    ]),
    [
      ['a', true, undefined],
      ['b', false, undefined],
      ['c', false, 31],
    ],
  );
  assert.deepEqual(
    cov.gaps.map((g: { operationId: string }) => g.operationId),
    ['b'],
  );
});
