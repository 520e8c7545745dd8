// Files at rest: the data dir and the database are the server's alone, even when the directory existed
// before with looser modes (fixed at start, with one log line).
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { loadConfig } from '../config.js';
import { startServer } from '../main.js';
import { secureDataDir } from './data-dir.js';

const mode = (p: string) => statSync(p).mode & 0o777;

describe('data dir permissions', () => {
  it('a loose data dir becomes 0700 and each file in it 0600; a second pass changes nothing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-perm-'));
    try {
      chmodSync(dir, 0o755);
      writeFileSync(join(dir, 'berth.db'), 'x', { mode: 0o644 });
      writeFileSync(join(dir, 'berth.db-wal'), 'x', { mode: 0o666 });
      writeFileSync(join(dir, 'private'), 'x', { mode: 0o600 });
      const fixed = secureDataDir(dir);
      assert.deepEqual(fixed.sort(), [dir, join(dir, 'berth.db'), join(dir, 'berth.db-wal')].sort());
      assert.equal(mode(dir), 0o700);
      for (const f of ['berth.db', 'berth.db-wal', 'private']) assert.equal(mode(join(dir, f)), 0o600, f);
      assert.deepEqual(secureDataDir(dir), []);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a server started on a world-readable data dir leaves no file in it readable by others, and says so once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-perm-'));
    // The usual umask of whoever embeds the server: startServer must not rely on `berth serve`'s own.
    const umask = process.umask(0o022);
    try {
      chmodSync(dir, 0o755);
      writeFileSync(join(dir, 'notes.txt'), 'left by an older version', { mode: 0o644 });
      const logs = new PassThrough();
      let text = '';
      logs.on('data', (d) => (text += d));
      const cfg = loadConfig({ port: '0', dataDir: dir }, { BERTH_LOG_LEVEL: 'info' });
      const s = await startServer(cfg, { logStream: logs });
      try {
        const r = await fetch(`${s.url}/v0/policies`, { headers: { authorization: `Bearer ${s.adminKey}` } });
        assert.equal(r.status, 200); // the database has been written to
        assert.equal(mode(dir), 0o700);
        assert.ok(existsSync(join(dir, 'berth.db')));
        for (const f of readdirSync(dir)) {
          const st = statSync(join(dir, f));
          if (st.isFile()) assert.equal(st.mode & 0o077, 0, `${f} is ${(st.mode & 0o777).toString(8)}`);
        }
        assert.equal(text.match(/data dir was readable by other users/g)?.length, 1);
      } finally {
        await s.close();
      }
    } finally {
      process.umask(umask);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
