// The window between an image's acknowledgement and its second copy (bench/cluster/images-ahead.mjs,
// docs/decisions/087-images-ahead.md), printed as one JSON line: two `berth serve` on one PostgreSQL, once answering
// image writes at once (BERTH_IMAGE_COPY_WAIT_S=0) and once after a second node holds the image (the default); each
// time IMAGES_AHEAD_RUNS images (busybox and IMAGES_AHEAD_MB of random bytes, so no two share their own layer) are
// imported through the leader, one after the other; for each, how long the import took to answer, and how long after
// the answer the follower held the image's root (0 when it already did).
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { busyboxLayer, savedArchive, tarOf } from '../../src/runtime/images/test-support/registry.js';
import { startPostgres } from '../../src/test-support/postgres.js';
import { serve, stopped } from '../serve-process.js';

const RUNS = Number(process.env.IMAGES_AHEAD_RUNS ?? 5);
const MB = Number(process.env.IMAGES_AHEAD_MB ?? 20);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const pg = await startPostgres();
const busybox = await busyboxLayer();
const out: Record<string, { answerMs: number; secondCopyAfterMs: number; copies: string | null }[]> = {};
const loads: number[] = [];
try {
  for (const wait of ['0', '30']) {
    const env = {
      BERTH_DATABASE_URL: await pg.database(),
      BERTH_MASTER_KEY: randomBytes(32).toString('base64'),
      BERTH_NODE_LEASE_S: '2',
      BERTH_IMAGE_COPY_WAIT_S: wait,
    };
    const dirs = ['a', 'b'].map((id) => mkdtempSync(join(tmpdir(), `berth-images-ahead-${id}-`)));
    const a = await serve(dirs[0], { ...env, BERTH_NODE_ID: 'node-a' });
    const key = readFileSync(join(dirs[0], 'admin.key'), 'utf8').trim();
    const b = await serve(dirs[1], { ...env, BERTH_NODE_ID: 'node-b' });
    const runs: (typeof out)[string] = [];
    try {
      // The follower listed healthy on the leader before the first write (else it is answered with one copy).
      for (let i = 0; i < 100; i++) {
        const nodes = (await (
          await fetch(`${a.url}/v0/nodes`, { headers: { authorization: `Bearer ${key}` } })
        ).json()) as { id: string; healthy: boolean }[];
        if (nodes.some((n) => n.id === 'node-b' && n.healthy)) break;
        await sleep(100);
      }
      for (let run = 0; run < RUNS; run++) {
        const files = await tarOf([{ name: 'payload', body: randomBytes(MB * 1024 ** 2) }]);
        const { archive, id } = await savedArchive([busybox, files], [`local/bench:${run}`]);
        loads.push(Number(loadavg()[0].toFixed(1)));
        const t0 = performance.now();
        const r = await fetch(`${a.url}/v0/images/import`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/x-tar' },
          body: new Uint8Array(archive),
        });
        await r.arrayBuffer();
        if (r.status !== 200) throw new Error(`import answered ${r.status}`);
        const t1 = performance.now();
        const root = join(dirs[1], 'images/oci/roots', id.slice(7));
        while (!existsSync(root)) {
          if (performance.now() - t1 > 60_000) throw new Error('node-b did not copy it in 60 s');
          await sleep(5);
        }
        runs.push({
          answerMs: Math.round(t1 - t0),
          secondCopyAfterMs: Math.round(performance.now() - t1),
          copies: r.headers.get('x-berth-image-copies'),
        });
      }
      out[wait === '0' ? 'answeredAtOnce' : 'answeredAfterSecondCopy'] = runs;
    } finally {
      for (const p of [a, b]) {
        p.child.kill('SIGTERM');
        await stopped(p.child);
      }
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    }
  }
  console.log(JSON.stringify({ mb: MB, load: [Math.min(...loads), Math.max(...loads)], ...out }));
} finally {
  await pg.stop();
}
