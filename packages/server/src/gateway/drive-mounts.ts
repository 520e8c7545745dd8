// The sandbox API's `/drives/mount` routes, answered by the server before anything reaches the sandbox: a mount
// needs the host (the drive's image, the sandbox's labels and the drive's permissions, the runtime's helper), and
// the in-sandbox daemon has no capability to mount anything (decision 031).
//   POST   /drives/mount {driveName, mountPath, drivePath?, readOnly?}   → 200 {success, message, ...}
//   GET    /drives/mount                                               → 200 {mounts: [...]}
//   DELETE /drives/mount/{mountPath}                                   → 200 {success, message, mountPath}
import type { IncomingMessage, ServerResponse } from 'node:http';
import { posix } from 'node:path';
import { ApiError } from '../errors.js';
import { type RuntimeDriver, SandboxNotFoundError } from '../runtime/driver.js';
import type { Store } from '../store/store.js';
import { type DrivePermission, driveAccessRefusal } from './drive-access.js';
import type { Target } from './targets.js';

/** A mount request is a few short strings; anything larger is not one. */
export const MAX_MOUNT_BODY_BYTES = 16 * 1024;
/** Linux's PATH_MAX: a longer path could not be mounted anyway. */
const MAX_PATH = 4096;

export interface DriveMountInfo {
  driveName: string;
  drivePath: string;
  mountPath: string;
  readOnly: boolean;
}

const ROUTE = /^\/drives\/mount(?:\/(.*))?$/;

export function isDriveMountPath(path: string): boolean {
  return ROUTE.test(path.split('?')[0]);
}

/** An absolute, normalized path without `..`; `what` names the field in the 400. */
function cleanPath(raw: unknown, what: string, absolute: boolean): string {
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > MAX_PATH || raw.includes('\0'))
    throw new ApiError('MALFORMED_REQUEST', `${what} must be a path of at most ${MAX_PATH} characters`);
  const p = posix.normalize(absolute ? raw : `/${raw}`).replace(/(.)\/+$/, '$1');
  if (!p.startsWith('/') || raw.split('/').includes('..'))
    throw new ApiError(
      'MALFORMED_REQUEST',
      `${what} must be an absolute path without ".." (got ${JSON.stringify(raw)})`,
    );
  return p;
}

function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_MOUNT_BODY_BYTES) {
        reject(new ApiError('PAYLOAD_TOO_LARGE', `a mount request is at most ${MAX_MOUNT_BODY_BYTES} bytes`));
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => {
      try {
        const v = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        if (v && typeof v === 'object' && !Array.isArray(v)) resolve(v);
        else reject(new ApiError('MALFORMED_REQUEST', 'the body must be a JSON object'));
      } catch {
        reject(new ApiError('MALFORMED_REQUEST', 'the body is not JSON'));
      }
    });
    req.on('error', reject);
  });
}

function sendJson(res: ServerResponse, body: unknown) {
  const text = JSON.stringify(body);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export class DriveMounts {
  constructor(private readonly deps: { store: Store; driver: RuntimeDriver }) {}

  async serve(t: Target, path: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const m = ROUTE.exec(path.split('?')[0])!;
    const method = req.method ?? 'GET';
    if (m[1] !== undefined) {
      if (method !== 'DELETE')
        throw new ApiError('METHOD_NOT_ALLOWED', 'DELETE /drives/mount/{mountPath} unmounts', {
          headers: { allow: 'DELETE' },
        });
      return sendJson(res, await this.unmount(t, cleanPath(decodeURIComponent(m[1]), 'mountPath', false)));
    }
    if (method === 'GET') return sendJson(res, { mounts: [...(await this.of(t)).values()] });
    if (method === 'POST') return sendJson(res, await this.mount(t, await readJson(req)));
    throw new ApiError('METHOD_NOT_ALLOWED', 'GET lists the mounted drives, POST mounts one', {
      headers: { allow: 'GET, POST' },
    });
  }

  /**
   * The sandbox's drive mounts by mount path, read from the runtime each time (the sandbox's own mount table):
   * nothing is kept here, so a server restart forgets nothing and a recreated sandbox starts empty.
   */
  private async of(t: Target): Promise<Map<string, DriveMountInfo>> {
    const out = new Map<string, DriveMountInfo>();
    const mounts = await this.deps.driver.driveMounts(t.id).catch((e) => {
      if (e instanceof SandboxNotFoundError) return [];
      throw e;
    });
    // Deepest first from the runtime; listed in mount-path order.
    for (const m of mounts.sort((a, b) => a.mountPath.localeCompare(b.mountPath)))
      if (m.drive.workspace === t.key.workspace)
        out.set(m.mountPath, {
          driveName: m.drive.name,
          drivePath: m.drivePath,
          mountPath: m.mountPath,
          readOnly: m.readOnly,
        });
    return out;
  }

  private async mount(t: Target, body: Record<string, unknown>) {
    if (typeof body.driveName !== 'string' || !body.driveName)
      throw new ApiError('MALFORMED_REQUEST', 'driveName is required');
    const mountPath = cleanPath(body.mountPath, 'mountPath', true);
    if (mountPath === '/') throw new ApiError('MALFORMED_REQUEST', 'mountPath cannot be /');
    const drivePath = body.drivePath === undefined ? '/' : cleanPath(body.drivePath, 'drivePath', false);
    if (body.readOnly !== undefined && typeof body.readOnly !== 'boolean')
      throw new ApiError('MALFORMED_REQUEST', 'readOnly must be true or false');
    const readOnly = body.readOnly === true;
    const { workspace } = t.key;
    const drive = await this.deps.store.get({ kind: 'Drive', workspace, parent: '', name: body.driveName });
    if (!drive || drive.body.status === 'TERMINATED' || drive.body.status === 'DELETING')
      throw new ApiError('NOT_FOUND', `drive ${JSON.stringify(body.driveName)} does not exist`);
    if (drive.body.status !== 'DEPLOYED')
      throw new ApiError(
        'INVALID_STATE',
        `drive ${JSON.stringify(body.driveName)} is ${drive.body.status}, not DEPLOYED: it cannot be mounted now`,
      );
    const sandbox = await this.deps.store.get(t.key);
    const refusal = driveAccessRefusal(
      drive.body.spec?.permissions as DrivePermission[] | undefined,
      sandbox?.body.metadata?.labels,
      drivePath,
      readOnly,
    );
    if (refusal)
      throw new ApiError(
        'FORBIDDEN',
        `drive ${JSON.stringify(body.driveName)} cannot be mounted here: ${refusal}`,
      );
    const mounts = await this.of(t);
    if (mounts.has(mountPath))
      throw new ApiError(
        'CONFLICT',
        `${mountPath} already has drive ${JSON.stringify(mounts.get(mountPath)!.driveName)} mounted; unmount it first`,
      );
    let at: string;
    try {
      at = await this.deps.driver.mountDrive(t.id, {
        drive: { workspace, name: body.driveName, drive: true },
        drivePath,
        mountPath,
        readOnly,
      });
    } catch (e) {
      // The helper's message names the step (drivePath missing, mountPath on a read-only file system, ...).
      throw new ApiError(
        'VALIDATION_FAILED',
        `the drive could not be mounted at ${mountPath}: ${(e as Error).message.trim()}`,
      );
    }
    // The path the list and DELETE use: the asked one with any symlink in it resolved (the kernel's name).
    const info = { driveName: body.driveName, drivePath, mountPath: at, readOnly };
    return {
      success: true,
      message: `drive ${JSON.stringify(info.driveName)} mounted at ${at}`,
      ...info,
    };
  }

  private async unmount(t: Target, mountPath: string) {
    const mounts = await this.of(t);
    if (!mounts.has(mountPath)) throw new ApiError('NOT_FOUND', `no drive is mounted at ${mountPath}`);
    await this.deps.driver.unmountDrive(t.id, mountPath);
    return { success: true, message: `unmounted ${mountPath}`, mountPath };
  }
}
