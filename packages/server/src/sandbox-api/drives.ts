// /drives/* reaching the daemon itself: drive mounts are made by the server, which answers these routes before
// they are forwarded (gateway/drive-mounts.ts, decision 031); the daemon has no capability to mount anything.
import type { Handler } from './router.js';
import { HttpError } from './http.js';

export function drivesUnavailable(): Handler {
  return () => {
    throw new HttpError(
      501,
      "drives are mounted by the Berth server: call /drives/mount through the sandbox's address, not the daemon's socket",
    );
  };
}
