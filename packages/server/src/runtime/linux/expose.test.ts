// The exposures that make directories under private parents reachable by bwrap belong to one data dir each: two
// servers on one host exposing the same directory get a mount each, and one closing removes its own only (as root).
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { mountsUnder } from './disk.js';
import { ensureRunDirs, exposeDir, exposeDirOf, unexposeUnder } from './host.js';

const root = process.getuid?.() === 0;
let dir: string;
let shared: string;
const a = () => join(dir, 'server-a');
const b = () => join(dir, 'server-b');

before(() => {
  if (!root) return;
  ensureRunDirs();
  // mkdtemp makes a 0700 directory: what is inside is not reachable by the sandboxes' users without an exposure.
  dir = mkdtempSync(join(tmpdir(), 'berth-expose-'));
  shared = join(dir, 'code');
  mkdirSync(shared);
  writeFileSync(join(shared, 'f'), 'x');
  for (const d of [a(), b()]) mkdirSync(d);
});
after(async () => {
  if (!root) return;
  await unexposeUnder(a());
  await unexposeUnder(b());
  rmSync(dir, { recursive: true, force: true });
});

test('two data dirs exposing one directory get a mount each, and closing one leaves the other’s', {
  skip: !root && 'needs root (mounts)',
}, async () => {
  const ta = await exposeDir(a(), shared);
  const tb = await exposeDir(b(), shared);
  assert.notEqual(ta, tb);
  assert.ok(ta.startsWith(`${exposeDirOf(a())}/`) && tb.startsWith(`${exposeDirOf(b())}/`));
  assert.equal(statSync(join(ta, 'f')).size, 1);
  assert.equal(await exposeDir(a(), shared), ta, 'the same exposure again');

  await unexposeUnder(a());
  assert.equal(existsSync(exposeDirOf(a())), false, "the closing server's exposures are gone");
  assert.deepEqual(mountsUnder(tb), [tb], "the other server's mount stays");
  assert.equal(statSync(join(tb, 'f')).size, 1);

  // A volume's removal takes the exposures under its directory only.
  const vol = join(b(), 'vol');
  mkdirSync(vol);
  const tv = await exposeDir(b(), vol);
  await unexposeUnder(b(), vol);
  assert.deepEqual(mountsUnder(tv), []);
  assert.deepEqual(mountsUnder(tb), [tb]);
});
