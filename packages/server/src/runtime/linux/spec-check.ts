// Rejects a spec the driver cannot honour before anything is created. Controllers validate user
// input long before this; these are the runtime's own invariants.
import { isAbsolute, normalize } from 'node:path';
import { isDefaultImage } from '../../kinds/image-reference.js';
import type { SandboxSpec } from '../driver.js';

/** Paths the runtime itself provides: a volume may be mounted neither on nor under them. */
const RESERVED_TREES = [
  ...['/proc', '/dev', '/sys', '/etc', '/usr', '/bin', '/sbin', '/lib', '/lib64'],
  ...['/run/berth', '/opt/berth', '/opt/node_modules', '/node_modules'],
];
/** ...and these only exactly (a volume under /opt or /run is fine). */
const RESERVED_EXACT = ['/', '/run', '/opt'];

export function checkSpec(spec: SandboxSpec): void {
  const bad = (msg: string): never => {
    throw new Error(`invalid sandbox spec: ${msg}`);
  };
  if (!(spec.memoryMb >= 16)) bad('memoryMb must be at least 16');
  if (!(spec.diskMb >= 1)) bad('diskMb must be at least 1');
  if (!(spec.pidsMax >= 1)) bad('pidsMax must be positive');
  if (!(spec.cpuShares >= 2 && spec.cpuShares <= 262144)) bad('cpuShares must be within 2..262144');
  for (const [k, v] of Object.entries(spec.envs)) {
    if (!k || k.includes('=') || k.includes('\0')) bad(`env name ${JSON.stringify(k)}`);
    if (typeof v !== 'string' || v.includes('\0')) bad(`env ${k} must be a string without NUL bytes`);
  }
  if (spec.layers?.length && isDefaultImage(spec.image))
    bad('layers stack over an image, not the default one');
  for (const l of spec.layers ?? []) if (!isAbsolute(l)) bad(`layer ${l} must be an absolute path`);
  for (const l of spec.snapshotLayers ?? [])
    if (!isAbsolute(l)) bad(`snapshot layer ${l} must be an absolute path`);
  if (spec.user !== undefined && !/^\d+(:\d+)?$/.test(spec.user)) bad('user must be uid[:gid] in numbers');
  for (const v of spec.volumes) {
    if (!isAbsolute(v.hostPath)) bad(`volume hostPath ${v.hostPath} must be absolute`);
    if (!isAbsolute(v.mountPath)) bad(`volume mountPath ${v.mountPath} must be absolute`);
    const m = normalize(v.mountPath).replace(/\/+$/, '') || '/';
    if (RESERVED_EXACT.includes(m) || RESERVED_TREES.some((r) => m === r || m.startsWith(`${r}/`))) {
      bad(`volume mountPath ${v.mountPath} would hide a path the runtime provides`);
    }
  }
}
