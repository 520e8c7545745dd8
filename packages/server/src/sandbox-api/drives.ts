// /drives/mount (mounting a drive into the running sandbox) is not in this build: a clear 501, never a pretence.
import type { Handler } from './router.js';
import { HttpError } from './http.js';

export function drivesUnavailable(): Handler {
  return () => {
    throw new HttpError(
      501,
      'drives are not available in this build: mount a volume when creating the sandbox',
    );
  };
}
