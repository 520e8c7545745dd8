// GET /filesystem-find/{path}?type=file|directory&patterns=*.ts,*.js&maxResults=&excludeDirs=&excludeHidden=
// lists entries under a directory, paths relative to it.
import { stat } from 'node:fs/promises';
import type { SandboxApi } from '../context.js';
import { badRequest, fsError, queryBool, queryInt, queryList, sendJson } from '../http.js';
import { PathResolver } from '../paths.js';
import type { Handler } from '../router.js';
import type { FindResponse } from '../schema.js';
import { globMatcher } from './glob.js';
import { walk } from './walk.js';

export const FIND_DEFAULT_RESULTS = 20;
/** Upper bound of maxResults, and what maxResults=0 ("all") means. */
export const FIND_MAX_RESULTS = 10_000;

export function findFiles(api: SandboxApi): Handler {
  return async ({ res, params, query }) => {
    const abs = await api.paths.resolve(PathResolver.decode(params.path));
    await assertDir(abs);
    const type = query.get('type') || 'file';
    if (type !== 'file' && type !== 'directory') throw badRequest(`invalid search type: ${type}`);
    const requested = queryInt(query, 'maxResults', FIND_DEFAULT_RESULTS, FIND_MAX_RESULTS);
    const max = requested === 0 ? FIND_MAX_RESULTS : requested;
    const matches = globMatcher(queryList(query, 'patterns') ?? []);
    const body: FindResponse = { matches: [], total: 0 };
    const entries = walk(abs, {
      excludeDirs: queryList(query, 'excludeDirs') ?? [],
      excludeHidden: queryBool(query, 'excludeHidden', true),
    });
    for await (const e of entries) {
      if (e.type !== type) continue;
      if (type === 'file' && !matches(e.name)) continue;
      body.matches.push({ path: e.rel, type: e.type });
      if (body.matches.length >= max) break;
    }
    body.total = body.matches.length;
    sendJson(res, 200, body);
  };
}

export async function assertDir(abs: string): Promise<void> {
  const st = await stat(abs).catch((err) => Promise.reject(fsError(err, abs)));
  if (!st.isDirectory()) throw badRequest(`${abs} is not a directory`);
}
