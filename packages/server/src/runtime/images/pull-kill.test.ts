// A pull killed with SIGKILL mid-download leaves nothing a later pull would use: no blob under its final name,
// no root that looks finished; the next store sweeps the debris and the pull completes.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ImageStore } from './image-store.js';
import {
  loopbackOutbound,
  Pusher,
  startRegistry,
  type TestRegistry,
  tarOf,
} from './test-support/registry.js';

let reg: TestRegistry;
let dataDir: string;
before(async () => {
  reg = await startRegistry();
  dataDir = mkdtempSync(join(tmpdir(), 'berth-pullkill-'));
});
after(async () => {
  await reg.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

test('kill -9 during a pull, then the pull completes from a clean state', { timeout: 120_000 }, async () => {
  // Random bytes do not compress: ~96 MB on the wire, long enough to be caught mid-download.
  const big = randomBytes(96 << 20);
  const img = await new Pusher(reg).image('test/big', 'v1', [await tarOf([{ name: 'big.bin', body: big }])]);
  const blobs = join(dataDir, 'images', 'oci', 'blobs', 'sha256');
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(import.meta.dirname, 'test-support', 'pull-child.ts')],
    {
      env: { ...process.env, BT_DATA_DIR: dataDir, BT_IMAGE: img.reference },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  // Kill once a partial layer file exists (the download is under way).
  for (let i = 0; ; i++) {
    const partial = existsSync(blobs) && readdirSync(blobs).some((n) => n.includes('.partial-'));
    if (partial) break;
    if (child.exitCode !== null || i > 6000) assert.fail('the pull ended before it could be killed');
    await new Promise((r) => setTimeout(r, 5));
  }
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  assert.ok(!existsSync(join(blobs, img.layers[0].slice(7))), 'no layer under its final name');
  const store = new ImageStore({ dataDir, outbound: loopbackOutbound() });
  assert.deepEqual(
    readdirSync(blobs).filter((n) => n.includes('.partial-')),
    [],
    'debris swept at open',
  );
  assert.equal(store.find('ws', img.reference), undefined);
  const got = await store.pull('ws', img.reference);
  assert.ok(readFileSync(join(got.rootfs, 'big.bin')).equals(big));
});
