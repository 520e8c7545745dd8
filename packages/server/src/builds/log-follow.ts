// A build log read while it grows (`GET .../revisions/{rev}/logs?follow=true`): what is written so far, then each
// new piece as the build appends it, ending once the build is over. A build log is a plain file appended by the
// builder (builder.ts), so following it is reading past the last offset until the builder says the key is done.
import { open } from 'node:fs/promises';

/** How often a followed log is looked at for new bytes: a build line shows within this, at a negligible cost. */
export const LOG_POLL_MS = 200;
/** Largest piece read at once, so a long log streams in pieces instead of one buffer. */
const READ_CHUNK = 64 * 1024;

export interface FollowSource {
  /** The log file's path, or undefined while the build has not started writing it. */
  path: () => string | undefined;
  /** True while more may be written (the build runs, or is about to start). */
  live: () => boolean | Promise<boolean>;
  signal?: AbortSignal;
  sleep?: (ms: number) => Promise<void>;
}

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Yields the log's bytes from the start, then new ones, until `live()` is false and the end has been read. */
export async function* followLog(src: FollowSource): AsyncGenerator<Buffer> {
  const sleep = src.sleep ?? defaultSleep;
  let offset = 0;
  for (;;) {
    if (src.signal?.aborted) return;
    // Asked before reading: a build that ends right after still has its last bytes read on this pass.
    const live = await src.live();
    const path = src.path();
    if (path) {
      const fh = await open(path, 'r').catch(() => undefined);
      if (fh)
        try {
          for (;;) {
            const buf = Buffer.alloc(READ_CHUNK);
            const { bytesRead } = await fh.read(buf, 0, READ_CHUNK, offset);
            if (!bytesRead) break;
            offset += bytesRead;
            yield buf.subarray(0, bytesRead);
          }
        } finally {
          await fh.close();
        }
    }
    if (!live) return;
    await sleep(LOG_POLL_MS);
  }
}
