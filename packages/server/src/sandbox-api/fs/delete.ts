// DELETE /filesystem/{path}?recursive=true: removes a file, a symlink (not its target) or a directory (only an
// empty one unless recursive).
import { lstat, rm, rmdir, unlink } from 'node:fs/promises';
import type { SandboxApi } from '../context.js';
import { fsError, queryBool, sendJson } from '../http.js';
import { PathResolver } from '../paths.js';
import type { Handler } from '../router.js';
import type { SuccessResponse } from '../schema.js';

export function deletePath(api: SandboxApi): Handler {
  return async ({ res, params, query }) => {
    const abs = await api.paths.resolve(PathResolver.decode(params.path));
    sendJson(res, 200, await removePath(abs, queryBool(query, 'recursive', false)));
  };
}

export async function removePath(abs: string, recursive: boolean): Promise<SuccessResponse> {
  try {
    const st = await lstat(abs);
    if (st.isDirectory()) {
      if (recursive) await rm(abs, { recursive: true, force: true });
      else await rmdir(abs);
      return { message: 'Directory deleted successfully', path: abs };
    }
    await unlink(abs);
    return { message: 'File deleted successfully', path: abs };
  } catch (err) {
    throw fsError(err, abs);
  }
}
