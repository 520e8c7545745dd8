// GET /filesystem-search/{path}?query=&maxResults=&patterns=&excludeDirs=&excludeHidden= ranks the entries under
// a directory by how well their relative path fuzzy-matches the query (fzf-like: in-order characters, with bonuses
// for runs, word starts and the base name).
import type { SandboxApi } from '../context.js';
import { queryBool, queryInt, queryList, sendJson } from '../http.js';
import { PathResolver } from '../paths.js';
import type { Handler } from '../router.js';
import type { FuzzySearchResponse } from '../schema.js';
import { assertDir } from './find.js';
import { globMatcher } from './glob.js';
import { DEFAULT_EXCLUDED_DIRS, walk } from './walk.js';

export const SEARCH_DEFAULT_RESULTS = 20;
export const SEARCH_MAX_RESULTS = 1000;

export function fuzzySearch(api: SandboxApi): Handler {
  return async ({ res, params, query }) => {
    const abs = await api.paths.resolve(PathResolver.decode(params.path));
    await assertDir(abs);
    const q = query.get('query') ?? '';
    const max =
      queryInt(query, 'maxResults', SEARCH_DEFAULT_RESULTS, SEARCH_MAX_RESULTS) || SEARCH_DEFAULT_RESULTS;
    const patterns = globMatcher(queryList(query, 'patterns') ?? []);
    const scored: FuzzySearchResponse['matches'] = [];
    const entries = walk(abs, {
      excludeDirs: queryList(query, 'excludeDirs') ?? DEFAULT_EXCLUDED_DIRS,
      excludeHidden: queryBool(query, 'excludeHidden', true),
    });
    for await (const e of entries) {
      if (e.type === 'file' && !patterns(e.name)) continue;
      const score = fuzzyScore(q, e.rel);
      if (score !== null) scored.push({ path: e.rel, score, type: e.type });
    }
    scored.sort((a, b) => b.score - a.score || a.path.length - b.path.length || (a.path < b.path ? -1 : 1));
    const matches = scored.slice(0, max);
    sendJson(res, 200, { matches, total: matches.length } satisfies FuzzySearchResponse);
  };
}

const SCORE_MATCH = 16;
const BONUS_RUN = 8;
const BONUS_WORD_START = 12;
const BONUS_BASENAME = 4;
const PENALTY_GAP = 1;

/** Null when `query` is not an in-order (case-insensitive) subsequence of `text`; else higher is better. */
export function fuzzyScore(query: string, text: string): number | null {
  if (query === '') return 0;
  const q = query.toLowerCase();
  const t = text.toLowerCase();
  const baseStart = text.lastIndexOf('/') + 1;
  let score = 0;
  let ti = 0;
  let prev = -2;
  for (const ch of q) {
    const at = t.indexOf(ch, ti);
    if (at < 0) return null;
    score += SCORE_MATCH;
    if (at === prev + 1) score += BONUS_RUN;
    else if (prev >= 0) score -= PENALTY_GAP * Math.min(at - prev - 1, 16);
    const before = at === 0 ? '/' : text[at - 1];
    if ('/_-. '.includes(before) || (before === before.toLowerCase() && text[at] !== text[at].toLowerCase()))
      score += BONUS_WORD_START;
    if (at >= baseStart) score += BONUS_BASENAME;
    prev = at;
    ti = at + 1;
  }
  return score;
}
