// A node:test reporter that prints a short summary instead of the full TAP (which run-tests.mjs writes to a
// log file beside it): counts, the wall time, the slowest files, and each failure with its error and its file's
// output. The last line is always `N passed, N failed` (plus `, N skipped` when any were), which scripts read.
import { writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { inspect } from 'node:util';

const SLOWEST = 10;
/** Lines of a failing file's own output shown with its failures; the TAP log holds all of it. */
const OUTPUT_LINES = 40;
/**
 * Lines of an error's inspection shown per failure: its first lines (message, diff) and its last (a message
 * that ends with the output it quotes, the bottom of a stack).
 */
const ERROR_HEAD_LINES = 25;
const ERROR_TAIL_LINES = 35;

/** The source of a compiled test file the runner ran (scripts/test-build.mjs); any other path as it is. */
const sourceOf = (f) => f.replace(/\/\.test-build\/\d+\/(.*)\.js$/, '/$1.ts');
const rel = (f) => (f ? relative(process.cwd(), f) : '(unknown file)');
/** `12m03s`, `41.2s`. */
const clock = (ms) =>
  ms < 60_000
    ? `${(ms / 1000).toFixed(1)}s`
    : `${Math.floor(ms / 60_000)}m${String(Math.floor((ms % 60_000) / 1000)).padStart(2, '0')}s`;
const indent = (s, n = 4) =>
  s
    .split('\n')
    .map((l) => ' '.repeat(n) + l)
    .join('\n');
const clip = (lines, max) =>
  lines.length > max ? [...lines.slice(0, max), `… ${lines.length - max} more lines in the TAP log`] : lines;
const headAndTail = (lines) =>
  lines.length > ERROR_HEAD_LINES + ERROR_TAIL_LINES
    ? [
        ...lines.slice(0, ERROR_HEAD_LINES),
        `… ${lines.length - ERROR_HEAD_LINES - ERROR_TAIL_LINES} lines (all in the TAP log) …`,
        ...lines.slice(-ERROR_TAIL_LINES),
      ]
    : lines;

export default async function* summary(source) {
  // run-tests.mjs passes its own start, so the wall time includes node:test's start-up.
  const began = Number(process.env.BERTH_TEST_STARTED_MS) || Date.now();
  const files = new Map(); // file -> { ms, output: string[], failed: boolean, path: string[] }
  const failures = []; // { file, name, error }
  const skips = [];
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  const fileOf = (f) => {
    if (!files.has(f)) files.set(f, { ms: 0, output: [], failed: false, path: [] });
    return files.get(f);
  };
  const tty = process.stdout.isTTY;
  let done = 0;

  for await (const { type, data } of source) {
    const isFile = data?.file && data.name === data.file; // the test node:test makes of each file
    // A file's own test names the compiled copy it ran; its tests name the source (through the source map).
    const file = data?.file && sourceOf(data.file);
    if (type === 'test:diagnostic' && file) {
      // What a test reported with t.diagnostic() (node's own closing counts carry no file).
      skips.push(`${rel(file)}: ${data.message}`);
    } else if (type === 'test:stdout' || type === 'test:stderr') {
      if (file) fileOf(file).output.push(...data.message.replace(/\n$/, '').split('\n'));
    } else if (type === 'test:start' && !isFile && file) {
      const p = fileOf(file).path;
      p.length = data.nesting;
      p[data.nesting] = data.name;
    } else if (type === 'test:complete' && isFile) {
      const f = fileOf(file);
      f.ms = data.details.duration_ms;
      if (!data.details.passed) f.failed = true;
      done++;
      if (!data.details.passed) yield `${tty ? '\r\x1b[K' : ''}✖ ${rel(file)}\n`;
      if (tty) yield `\r\x1b[K${done}/${process.env.BERTH_TEST_FILES ?? '?'} files done`;
    } else if (type === 'test:pass' && !isFile && data.details?.type !== 'suite') {
      if (data.skip !== undefined || data.todo !== undefined) {
        skipped++;
        const why = data.skip ?? data.todo;
        // A reason other than --test-name-pattern's is worth a line: it says what did not run, and why.
        if (typeof why === 'string' && !why.startsWith('test name does not match'))
          skips.push(`${rel(file)} › ${data.name}: ${why}`);
      } else passed++;
    } else if (type === 'test:fail' && data.details?.type !== 'suite') {
      // A file's own failure (it crashed, or exited non-zero) counts only when none of its tests failed.
      if (isFile && failures.some((x) => x.file === file)) continue;
      failed++;
      const f = file ? fileOf(file) : undefined;
      // node:test says only 'test failed' when the file crashed or exited non-zero: its output tells why.
      const generic = isFile && (data.details.error?.cause ?? data.details.error?.message) === 'test failed';
      const name = isFile
        ? '(the file itself: it crashed, timed out or exited non-zero)'
        : [...(f?.path.slice(0, data.nesting) ?? []), data.name].join(' › ');
      failures.push({ file, name, error: generic ? undefined : data.details.error });
    }
  }
  if (tty) yield '\r\x1b[K';

  const list = [...files.entries()];
  const failedFiles = list.filter(([, f]) => f.failed).length;
  const out = [];
  out.push(
    `${list.length} files (${failedFiles} failed), ${passed + failed + skipped} tests, wall time ${clock(Date.now() - began)}`,
  );
  out.push('', `slowest files:`);
  for (const [file, f] of list.sort((a, b) => b[1].ms - a[1].ms).slice(0, SLOWEST))
    out.push(`  ${(f.ms / 1000).toFixed(1).padStart(6)} s  ${rel(file)}`);
  // Every file's time, slowest first, beside the TAP log: what to look at when the whole run grows.
  if (process.env.BERTH_TAP_LOG)
    writeFileSync(
      join(dirname(process.env.BERTH_TAP_LOG), 'file-times.tsv'),
      list.map(([file, f]) => `${(f.ms / 1000).toFixed(1)}\t${rel(file)}\n`).join(''),
    );
  if (skips.length) out.push('', 'skipped or noted:', ...clip(skips, SLOWEST).map((l) => `  ${l}`));
  const shown = new Set();
  if (failures.length) out.push('', 'failures:');
  for (const x of failures) {
    out.push('', `✖ ${rel(x.file)} › ${x.name}`);
    const err = x.error?.cause ?? x.error;
    if (err)
      out.push(indent(headAndTail((typeof err === 'string' ? err : inspect(err)).split('\n')).join('\n')));
    if (x.file && !shown.has(x.file)) {
      shown.add(x.file);
      const lines = fileOf(x.file).output.filter(
        (l, i, all) => l.trim() || all.slice(0, i).some((p) => p.trim()),
      );
      if (lines.length) {
        out.push(`  output of ${rel(x.file)} (last ${Math.min(lines.length, OUTPUT_LINES)} lines):`);
        out.push(indent(lines.slice(-OUTPUT_LINES).join('\n')));
      }
    }
  }
  out.push('', `full TAP: ${process.env.BERTH_TAP_LOG ?? 'see run-tests.mjs'}`);
  out.push(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
  yield `${out.join('\n')}\n`;
}
