// GET /watch/filesystem/{path}?ignore=a,b streams NDJSON file events `{op, name, path}` for a directory until the
// client goes; `{path}/**` watches the whole tree below it (as the service's daemon does). Keepalive lines
// (`[keepalive]`) keep idle proxies from closing the stream.
import type { SandboxApi } from '../context.js';
import { queryList, streamHeaders } from '../http.js';
import { PathResolver } from '../paths.js';
import type { Handler } from '../router.js';
import { KEEPALIVE_LINE } from '../schema.js';
import { assertDir } from './find.js';
import { TreeWatcher } from './tree-watcher.js';

export const WATCH_KEEPALIVE_MS = 15_000;

export function watchPath(api: SandboxApi): Handler {
  return async ({ res, params, query }) => {
    let raw = PathResolver.decode(params.path);
    let recursive = query.get('recursive') === 'true';
    if (raw === '**' || raw.endsWith('/**')) {
      recursive = true;
      raw = raw === '**' ? '.' : raw.slice(0, -3) || '/';
    }
    const abs = await api.paths.resolve(raw);
    await assertDir(abs);
    const ignore = queryList(query, 'ignore') ?? [];
    const watcher = new TreeWatcher(abs, recursive, (e) => {
      const full = `${e.path}/${e.name}`;
      if (ignore.some((p) => full.includes(p))) return;
      res.write(`${JSON.stringify(e)}\n`);
    });
    await watcher.start();
    // Headers go out only once the watch is armed: a client that saw the 200 can rely on seeing its changes.
    res.writeHead(200, streamHeaders('application/x-ndjson'));
    res.flushHeaders();
    const keepalive = setInterval(() => res.write(KEEPALIVE_LINE), WATCH_KEEPALIVE_MS);
    res.once('close', () => {
      clearInterval(keepalive);
      watcher.close();
    });
  };
}
