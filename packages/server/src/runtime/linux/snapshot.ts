// A snapshot layer (decision 053): what a running sandbox wrote over its root, copied while its cgroup is frozen so
// the copy is one instant of it (no process writes half a file into it), then thawed. Its processes, their open
// connections and requests keep going: a request arriving meanwhile waits for the thaw (RUNTIME-FACTS.md). The
// writable layer is a tmpfs and the data dir another filesystem, so the copy is bytes (no reflink across them):
// the pause grows with what the sandbox wrote, and is measured by bench/sandboxes.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { copyChanges } from './changes.js';
import type { SandboxCgroup } from './cgroup.js';

/**
 * Copies the upper of each overlay of the writable layer `rwDir` to `dest/<overlay>`, the sandbox frozen meanwhile
 * (one already frozen, in standby, stays frozen). Resolves with the time it was paused.
 */
export async function captureLayer(
  cg: SandboxCgroup,
  rwDir: string,
  dest: string,
): Promise<{ pausedMs: number }> {
  const ovl = join(rwDir, 'ovl');
  const overlays = existsSync(ovl) ? readdirSync(ovl) : [];
  const wasFrozen = cg.isFrozen();
  const t0 = performance.now();
  if (!wasFrozen) await cg.freeze();
  try {
    await Promise.all(overlays.map((name) => copyChanges(rwDir, join(dest, name), name)));
  } finally {
    if (!wasFrozen) cg.thaw();
  }
  return { pausedMs: performance.now() - t0 };
}
