// /filesystem/tree/{path}: GET the directory with every subdirectory's listing nested in it, PUT many files at
// once (`{files: {"rel/path": "content"}}`, parents made) answering the new tree, DELETE the directory.
import { mkdir, stat } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';
import type { SandboxApi } from '../context.js';
import { badRequest, fsError, queryBool, readJson, sendJson } from '../http.js';
import { PathResolver, within } from '../paths.js';
import type { Handler } from '../router.js';
import type { DirectoryJson, TreeRequest } from '../schema.js';
import { removePath } from './delete.js';
import { listDirectory } from './entries.js';
import { writeText } from './write.js';

/** A tree answer lists at most this many entries, and goes at most this deep: `/` must not take the daemon down. */
export const MAX_TREE_ENTRIES = 10_000;
export const MAX_TREE_DEPTH = 32;

export function getTree(api: SandboxApi): Handler {
  return async ({ res, params }) => {
    const abs = await api.paths.resolve(PathResolver.decode(params.path));
    sendJson(res, 200, await tree(abs));
  };
}

export function putTree(api: SandboxApi): Handler {
  return async ({ req, res, params }) => {
    const abs = await api.paths.resolve(PathResolver.decode(params.path));
    const body = (await readJson(req)) as TreeRequest;
    const files = body?.files ?? {};
    if (typeof files !== 'object' || Array.isArray(files))
      throw badRequest('files must be an object of path: content');
    // Check every target before writing any, so a refused entry leaves nothing half-written.
    const targets: [string, string][] = [];
    for (const [rel, content] of Object.entries(files)) {
      if (typeof content !== 'string') throw badRequest(`files[${JSON.stringify(rel)}] must be a string`);
      const target = resolve(abs, rel);
      if (isAbsolute(rel) || !within(abs, target) || target === abs)
        throw badRequest(`${rel} is not inside the tree`);
      await api.paths.check(target);
      targets.push([target, content]);
    }
    try {
      await mkdir(abs, { recursive: true, mode: 0o755 });
      for (const [target, content] of targets) await writeText(target, content);
    } catch (err) {
      throw fsError(err, abs);
    }
    sendJson(res, 200, await tree(abs));
  };
}

export function deleteTree(api: SandboxApi): Handler {
  return async ({ res, params, query }) => {
    const abs = await api.paths.resolve(PathResolver.decode(params.path));
    sendJson(res, 200, await removePath(abs, queryBool(query, 'recursive', true)));
  };
}

async function tree(abs: string): Promise<DirectoryJson> {
  try {
    if (!(await stat(abs)).isDirectory()) throw badRequest(`${abs} is not a directory`);
    return await listDirectory(abs, MAX_TREE_DEPTH, { entries: MAX_TREE_ENTRIES });
  } catch (err) {
    throw fsError(err, abs);
  }
}
