// POST /upgrade: replaces the daemon's code with the one on disk now — the server's current daemon, which every
// sandbox sees at /opt/berth (a read-only bind of the server's build) — without stopping anything. The new code
// is loaded into this same process and takes over: the listening server (the host's link to its socket stays
// valid), the processes it did not start (still this process's children, so their pipes, logs, stdin and exit
// codes stay whole) and the uploads in progress. Requests already under way finish on the code that took them.
// The answer is 200 only once the new code has taken over; a failure to load it leaves the old code serving.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import type { SandboxApi } from './context.js';
import { HttpError, sendJson } from './http.js';
import type { Handler } from './router.js';

/** Where the daemon being loaded finds what it takes over (a global: the new code shares nothing else with us). */
export const TAKEOVER_KEY = '__berthSandboxTakeover';

/** What one daemon's code hands to the next. Kept small and plain: versions on each side may differ. */
export interface Takeover {
  server: Server;
  /** The running api: its processes and uploads are adopted as they are. */
  api: SandboxApi;
  /** Called by the new code once it serves; `error` when it could not. */
  done(error?: Error): void;
}

/** The daemon's entry file as this process runs it (the bundle in a sandbox, daemon.ts under tsx in tests). */
export const entryFile = () => process.argv[1];

/** sha256 of the entry file's bytes, to say whether the code changed. */
export function codeHash(file = entryFile()): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex').slice(0, 16);
}

let generation = 0;

/** Loads the entry file afresh: a CommonJS bundle through require with its cache entry dropped, else as ESM. */
async function loadAfresh(file: string): Promise<void> {
  if (file.endsWith('.cjs')) {
    const req = createRequire(file);
    const resolved = req.resolve(file);
    delete req.cache[resolved];
    req(resolved);
    return;
  }
  await import(`${pathToFileURL(file).href}?generation=${++generation}`);
}

export function upgrade(api: SandboxApi, server: () => Server): Handler {
  return async ({ res }) => {
    const file = entryFile();
    const before = api.codeHash;
    let after: string;
    try {
      after = codeHash(file);
    } catch (err) {
      throw new HttpError(500, `the daemon's code cannot be read at ${file}: ${(err as Error).message}`);
    }
    const taken = new Promise<void>((resolve, reject) => {
      (globalThis as Record<string, unknown>)[TAKEOVER_KEY] = {
        server: server(),
        api,
        done: (error?: Error) => (error ? reject(error) : resolve()),
      } satisfies Takeover;
    });
    try {
      await loadAfresh(file);
      await taken;
    } catch (err) {
      api.lastUpgrade = {
        status: 'failed',
        step: 'replace',
        version: api.config.version,
        lastAttempt: new Date().toISOString(),
        error: (err as Error).message,
      };
      throw new HttpError(
        500,
        `the new daemon did not take over (the current one keeps serving): ${(err as Error).message}`,
      );
    } finally {
      delete (globalThis as Record<string, unknown>)[TAKEOVER_KEY];
    }
    sendJson(res, 200, {
      message: before === after ? 'daemon reloaded (its code had not changed)' : 'daemon upgraded',
      path: file,
      previousCode: before,
      code: after,
    });
  };
}
