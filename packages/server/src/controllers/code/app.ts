// How a built app runs in a sandbox, for agents' and functions' replicas and jobs' tasks alike: its directory bound
// read-only at /app (where it was built), its own tools first on the PATH, on the image it was built on.
import type { BaseImage } from '../../builds/builder.js';

/** Where the app directory is bound (the build ran at the same path). */
export const APP_DIR = '/app';
/** The image an app runs on when its spec names none: the host userland. */
export const APP_IMAGE = 'blaxel/base-image:latest';
/** Tasks per app sandbox: an HTTP server with a worker pool fits well under it. */
export const APP_PIDS_MAX = 1024;

/** PATH of processes in an app sandbox: the app's own tools first, then the image's (or the usual) path. */
export const appPath = (imagePath = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin') =>
  `${APP_DIR}/node_modules/.bin:${APP_DIR}/.venv/bin:${imagePath}`;
/** PATH of processes on the default image. */
export const APP_PATH = appPath();

/**
 * Where a revision's sandboxes run, for an app built on a stored image: that image (by id) and its PATH. Nothing
 * for the default image, so a revision's run (and its replicas' spec hash, which re-adoption compares) is what it
 * was before images existed.
 */
export function imageFields(base: BaseImage | undefined): { image?: string; path?: string } {
  return base ? { image: base.id, path: appPath(base.path) } : {};
}
