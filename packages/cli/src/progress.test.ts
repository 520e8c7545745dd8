// Progress as a terminal and as a pipe see it: phases with their elapsed time, a build log's own steps as phases, and
// escape codes only on a terminal that takes colours.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BuildLogView } from './build-log.js';
import { Progress } from './progress.js';

const ESC = '\u001b';

/** A stream that records what is written; a terminal that takes colours when `tty`. */
function stream(tty: boolean) {
  let text = '';
  const out = {
    isTTY: tty,
    columns: 80,
    hasColors: () => tty,
    write: (s: string) => {
      text += s;
      return true;
    },
  } as unknown as NodeJS.WriteStream;
  return { out, text: () => text };
}

/** A clock the test moves. */
function clock() {
  let t = 1_000;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

test('in a pipe: one plain line per phase, stamped with the time since the start, and no escape code', () => {
  const s = stream(false);
  const c = clock();
  const p = new Progress(s.out, c.now);
  p.phase('uploading 4 KB');
  c.advance(1500);
  p.phase('building');
  p.log('step output\n');
  p.phase('installing dependencies', false);
  c.advance(61_000);
  p.note('agent/x DEPLOYED');
  p.stop();
  assert.equal(
    s.text(),
    '[  0.0s] uploading 4 KB\n[  1.5s] building\nstep output\nagent/x DEPLOYED\n',
    'a phase the output passed through says already is not repeated',
  );
  assert.ok(!s.text().includes(ESC));
});

test('on a terminal: the phase on one redrawn line, then ✓ with how long it took; a failed one ✗', () => {
  const s = stream(true);
  const c = clock();
  const p = new Progress(s.out, c.now);
  p.phase('installing dependencies');
  assert.ok(s.text().startsWith(`\r${ESC}[K`), 'the line is redrawn in place');
  assert.match(s.text(), /installing dependencies {2}.*0s/);
  c.advance(23_100);
  p.phase('compiling (npm run build)');
  assert.match(s.text(), /✓.* installing dependencies {2}.*23\.1s/);
  p.log('half a line');
  p.log(' ended\n');
  assert.match(s.text(), /half a line ended\n/, 'a partial line is not cut by the spinner');
  c.advance(2_000);
  p.stop(true);
  assert.match(s.text(), /✗.* compiling \(npm run build\) {2}.*2\.0s/);
});

test("a build log's own steps become phases; its lines are printed as they come", () => {
  const s = stream(false);
  const p = new Progress(s.out, clock().now);
  const view = new BuildLogView(p);
  view.push('berth: unpacking sha256:ab\nberth: dependency cache miss (package-lock.json 1): install');
  view.push(
    'ing from package.json alone\nadded 12 packages\nberth: npm run build\n> tsc\nberth: build done\n',
  );
  view.end();
  assert.equal(
    s.text(),
    [
      'berth: unpacking sha256:ab',
      'berth: dependency cache miss (package-lock.json 1): installing from package.json alone',
      'added 12 packages',
      'berth: npm run build',
      '> tsc',
      'berth: build done',
      '',
    ].join('\n'),
  );
  const tty = stream(true);
  const live = new Progress(tty.out, clock().now);
  const v = new BuildLogView(live);
  v.push('berth: dependency cache miss (x): installing\nberth: npm run build\nberth: build done\n');
  live.stop();
  assert.match(tty.text(), /✓.* installing dependencies/);
  assert.match(tty.text(), /✓.* compiling \(npm run build\)/);
});
