#!/usr/bin/env node
// Lists every control-plane operation of the installed @blaxel/core (its generated client, read by calling each
// operation against a recorder, so nothing is sent) and says whether Berth routes it: an operation is routed when
// GET /v0/openapi.json has its method on a path of the same shape (the OpenAPI tests keep that document equal to
// the routes the server serves, both ways). One not routed is either waiting for a named issue (PENDING) or a gap.
// Run from the repository after `npm run build`: `node packages/server/scripts/sdk-operations.mjs` prints the table
// and exits 1 on a gap; test/blaxel/sdk-operations.test.ts runs the same check in the test suite, so operations a
// newer SDK adds show up at once.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * Operations Berth does not route yet and the issue that covers each, by path prefix (method-independent). An entry
 * applies only while its operations are not routed; one that matches no operation of the SDK is reported as stale.
 */
export const PENDING = [];

const METHODS = ['get', 'post', 'put', 'delete', 'patch'];

/** `/sandboxes/{sandboxName}/previews` -> `/sandboxes/{}/previews`: paths compared by shape, not parameter names. */
export const shapeOf = (path) => path.replace(/\{[^}]+\}/g, '{}');

/** Where the installed SDK's generated control-plane client is (the package's exports hide it from imports by name). */
function sdkClientFile() {
  const require = createRequire(import.meta.url);
  const pkg = require.resolve('@blaxel/core/package.json');
  return join(dirname(pkg), 'dist/esm/client/sdk.gen.js');
}

/** The installed SDK's version. */
export function sdkVersion() {
  const require = createRequire(import.meta.url);
  return JSON.parse(readFileSync(require.resolve('@blaxel/core/package.json'), 'utf8')).version;
}

/**
 * Every operation of the generated client: each exported function is called with a client that records the method
 * and path template it is asked for and sends nothing.
 */
export async function sdkOperations() {
  const mod = await import(pathToFileURL(sdkClientFile()).href);
  const out = [];
  for (const [operationId, fn] of Object.entries(mod)) {
    if (typeof fn !== 'function') continue;
    let seen;
    const recorder = Object.fromEntries(
      METHODS.map((m) => [m, (o) => (seen = { method: m.toUpperCase(), path: o.url })]),
    );
    try {
      fn({ client: recorder, path: {}, query: {}, body: {} });
    } catch {}
    if (seen?.path) out.push({ operationId, ...seen });
  }
  return out.sort((a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method));
}

/** The pending entry an operation falls under, if any. */
function pendingOf(op, pending = PENDING) {
  const shape = shapeOf(op.path);
  return pending.find((p) => {
    const [m, prefix] = p.prefix.includes(' ') ? p.prefix.split(' ') : [undefined, p.prefix];
    if (m && m !== op.method) return false;
    return m ? shape === prefix : shape === prefix || shape.startsWith(`${prefix}/`);
  });
}

/**
 * Each operation with `routed`, and for one not routed the pending entry covering it (none: a gap). `pending` is
 * PENDING but for the script's own test, which needs an entry whatever the table holds today.
 */
export function coverage(ops, doc, pending = PENDING) {
  const served = new Set();
  for (const [path, item] of Object.entries(doc.paths))
    for (const m of METHODS) if (item[m]) served.add(`${m.toUpperCase()} ${shapeOf(path)}`);
  const rows = ops.map((op) => {
    const routed = served.has(`${op.method} ${shapeOf(op.path)}`);
    return { ...op, routed, pending: routed ? undefined : pendingOf(op, pending) };
  });
  const stale = pending.filter((p) => !ops.some((op) => pendingOf(op, pending) === p)).map((p) => p.prefix);
  return {
    rows,
    routed: rows.filter((r) => r.routed).length,
    pending: rows.filter((r) => r.pending).length,
    gaps: rows.filter((r) => !r.routed && !r.pending),
    stale,
  };
}

/** The table as text: one line per operation, then the counts. */
export function report(cov, version) {
  const lines = cov.rows.map((r) => {
    const what = r.routed
      ? 'routed'
      : r.pending
        ? `not routed yet: issue ${r.pending.issue} (${r.pending.why})`
        : 'NOT ROUTED: no issue covers it';
    return `${r.method.padEnd(6)} ${r.path.padEnd(72)} ${r.operationId.padEnd(52)} ${what}`;
  });
  const byIssue = new Map();
  for (const r of cov.rows)
    if (r.pending) byIssue.set(r.pending.issue, (byIssue.get(r.pending.issue) ?? 0) + 1);
  const waiting = [...byIssue].map(([i, n]) => `${n} for issue ${i}`).join(', ');
  lines.push(
    `@blaxel/core ${version}: ${cov.rows.length} control-plane operations, ${cov.routed} routed, ` +
      `${cov.pending} not routed yet (${waiting || 'none'}), ${cov.gaps.length} not routed and covered by no issue`,
  );
  if (cov.stale.length) lines.push(`PENDING entries matching no operation: ${cov.stale.join(', ')}`);
  return lines.join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const dist = new URL('../dist/', import.meta.url);
  const load = (p) =>
    import(new URL(p, dist).href).catch((e) => {
      console.error(`cannot load the built server (${e.message}); run \`npm run build\` first`);
      process.exit(2);
    });
  const { buildOpenApiDocument } = await load('api/openapi.js');
  const { KINDS } = await load('kinds/index.js');
  const cov = coverage(await sdkOperations(), buildOpenApiDocument(KINDS));
  console.log(report(cov, sdkVersion()));
  process.exit(cov.gaps.length || cov.stale.length ? 1 : 0);
}
