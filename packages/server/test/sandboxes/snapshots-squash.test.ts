// Snapshot stacks squashed (decision 053, second pass): with BERTH_SNAPSHOT_MAX_LAYERS at 2, the third
// restore→snapshot cycle writes one merged layer instead of a third one (the first pass answered 409 past its bound),
// and what the sandbox sees is what the stack showed: the latest version of a file, a file deleted in a later layer
// still gone, a directory replaced (opaque) holding only its new contents, a file of the image deleted still hidden.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { serve, stopped } from '../serve-process.js';
import { removeAllSandboxes } from './support.js';
import { removeDirLater } from '../../src/test-support/sandboxes.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('past BERTH_SNAPSHOT_MAX_LAYERS a capture squashes the stack into one layer that shows the same files', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-snap-squash-'));
  let server: ChildProcess | undefined;
  try {
    const s = await serve(dataDir, { BERTH_SNAPSHOT_MAX_LAYERS: '2' });
    server = s.child;
    const key = readFileSync(join(dataDir, 'admin.key'), 'utf8').trim();
    const call = async (path: string, method = 'GET', body?: unknown) => {
      const res = await fetch(`${s.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined };
    };
    const sh = async (command: string) => {
      const r = await call('/run/default/sandboxes/sq/process', 'POST', { command, waitForCompletion: true });
      assert.equal(r.body?.exitCode, 0, JSON.stringify(r.body));
      return String(r.body.stdout).trim();
    };
    const snapshot = async (name: string) => {
      const r = await call('/v0/sandboxes/sq/snapshots', 'POST', { name });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      return r.body;
    };
    const restore = async (snap: any) => {
      const r = await call(`/v0/sandboxes/sq/snapshots/${snap.id}/restore`, 'POST');
      assert.equal(r.status, 200, JSON.stringify(r.body));
      for (let i = 0; i < 400; i++) {
        if ((await call('/v0/sandboxes/sq')).body?.status === 'DEPLOYED') return;
        await sleep(50);
      }
      assert.fail('sq never DEPLOYED after the restore');
    };
    const created = await call('/v0/sandboxes', 'POST', {
      metadata: { name: 'sq' },
      spec: { runtime: { memory: 256 } },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));

    const imageFile = await sh(
      'f=$(ls -d /usr/share/* | head -1); rm -rf "$f"; echo "$f"; cd /home/user; echo 1 > a; echo x > gone; mkdir d; echo old > d/old',
    );
    assert.match(imageFile, /^\/usr\/share\/./);
    const s1 = await snapshot('s1');
    assert.equal(s1.spec.layers, 1);
    await restore(s1);
    await sh('cd /home/user; echo 2 > a; rm gone; rm -r d; mkdir d; echo new > d/new; echo b > b');
    const s2 = await snapshot('s2');
    assert.equal(s2.spec.layers, 2);
    await restore(s2);
    await sh('echo 3 > /home/user/a');
    const s3 = await snapshot('s3');
    assert.equal(s3.spec.layers, 1, 'the third layer is squashed with the two below into one');
    await restore(s3);
    const seen = await sh(
      `cd /home/user; echo "$(cat a) $(cat b) $(ls d | tr '\\n' ,) $(test -e gone && echo gone-there || echo gone-absent) $(test -e ${imageFile} && echo image-there || echo image-absent)"`,
    );
    assert.equal(seen, '3 b new, gone-absent image-absent');

    // The cycles go on; older layers nothing stands on are freed.
    for (let i = 4; i <= 6; i++) {
      await sh(`echo ${i} > /home/user/a`);
      const snap = await snapshot(`s${i}`);
      assert.ok(snap.spec.layers <= 2, JSON.stringify(snap.spec));
      await restore(snap);
      assert.equal(await sh('cat /home/user/a /home/user/b'), `${i}\nb`);
    }
    for (const n of ['s1', 's2', 's3', 's4', 's5']) {
      const all = (await call('/v0/sandboxes/sq/snapshots')).body as any[];
      const id = all.find((x) => x.name === n).id;
      assert.equal((await call(`/v0/sandboxes/sq/snapshots/${id}`, 'DELETE')).status, 204);
    }
    const layers = readdirSync(join(dataDir, 'snapshots', 'workspaces', 'default', 'layers'));
    assert.ok(layers.length <= 2, `layers left: ${layers.length}`);
  } finally {
    if (server) {
      server.kill('SIGKILL');
      await stopped(server);
    }
    await removeAllSandboxes(dataDir);
    removeDirLater(dataDir);
  }
});
