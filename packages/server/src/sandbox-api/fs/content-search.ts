// GET /filesystem-content-search/{path}?query=&caseSensitive=&contextLines=&maxResults=&filePattern=&excludeDirs=
// finds the lines of text files under a directory that contain the query (plain text, not a regex).
import { open } from 'node:fs/promises';
import type { SandboxApi } from '../context.js';
import { badRequest, queryBool, queryInt, queryList, sendJson } from '../http.js';
import { PathResolver } from '../paths.js';
import type { Handler } from '../router.js';
import type { ContentSearchMatch, ContentSearchResponse } from '../schema.js';
import { assertDir } from './find.js';
import { globMatcher } from './glob.js';
import { DEFAULT_EXCLUDED_DIRS, walk } from './walk.js';

export const CONTENT_DEFAULT_RESULTS = 100;
export const CONTENT_MAX_RESULTS = 1000;
export const MAX_CONTEXT_LINES = 10;
/** Larger files are skipped: searching them would hold their text in memory. */
export const MAX_SEARCHED_FILE_BYTES = 10 * 1024 * 1024;
/** A NUL byte in a file's first bytes marks it binary (as grep judges it). */
const BINARY_SNIFF_BYTES = 8192;

export function contentSearch(api: SandboxApi): Handler {
  return async ({ res, params, query }) => {
    const q = query.get('query') ?? '';
    if (q === '') throw badRequest('query parameter is required');
    const abs = await api.paths.resolve(PathResolver.decode(params.path));
    await assertDir(abs);
    const caseSensitive = queryBool(query, 'caseSensitive', false);
    const contextLines = queryInt(query, 'contextLines', 0, MAX_CONTEXT_LINES);
    const max =
      queryInt(query, 'maxResults', CONTENT_DEFAULT_RESULTS, CONTENT_MAX_RESULTS) || CONTENT_DEFAULT_RESULTS;
    const filePattern = query.get('filePattern');
    const names = globMatcher(filePattern ? [filePattern] : []);
    const needle = caseSensitive ? q : q.toLowerCase();
    const matches: ContentSearchMatch[] = [];
    const entries = walk(abs, { excludeDirs: queryList(query, 'excludeDirs') ?? DEFAULT_EXCLUDED_DIRS });
    for await (const e of entries) {
      if (!e.regular || !names(e.name)) continue;
      const text = await readText(e.abs);
      if (text === null) continue;
      const lines = text.split('\n');
      for (let i = 0; i < lines.length && matches.length < max; i++) {
        const line = lines[i].endsWith('\r') ? lines[i].slice(0, -1) : lines[i];
        const col = (caseSensitive ? line : line.toLowerCase()).indexOf(needle);
        if (col < 0) continue;
        const m: ContentSearchMatch = { path: e.rel, line: i + 1, column: col + 1, text: line };
        if (contextLines > 0)
          m.context = lines.slice(Math.max(0, i - contextLines), i + contextLines + 1).join('\n');
        matches.push(m);
      }
      if (matches.length >= max) break;
    }
    sendJson(res, 200, { matches, query: q, total: matches.length } satisfies ContentSearchResponse);
  };
}

/** The file as UTF-8 text, or null when it is too large, binary or unreadable. */
async function readText(abs: string): Promise<string | null> {
  const fh = await open(abs, 'r').catch(() => null);
  if (!fh) return null;
  try {
    const st = await fh.stat();
    if (st.size > MAX_SEARCHED_FILE_BYTES) return null;
    const buf = await fh.readFile();
    if (buf.subarray(0, BINARY_SNIFF_BYTES).includes(0)) return null;
    return buf.toString('utf8');
  } catch {
    return null;
  } finally {
    await fh.close();
  }
}
