// "Did you mean memory?": the known field nearest to a misspelt one, by edit distance against the fields the
// schema declares at that level. Used for the warnings about dropped unknown fields and for strict rejections.
import type { TSchema } from '@sinclair/typebox';
import type { FieldIssue } from '../errors.js';

/** Edits (insert, delete, substitute, swap two neighbours) from `a` to `b`: `memroy` is one swap from `memory`. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.length][b.length];
}

/**
 * The one candidate nearest to `word` (case ignored), when it is near enough to be an obvious slip: a third of
 * the word's length, at least one edit. Two equally near candidates suggest neither.
 */
export function closest(word: string, candidates: string[]): string | undefined {
  const w = word.toLowerCase();
  const limit = Math.max(1, Math.floor(w.length / 3));
  let best: string | undefined;
  let bestD = Number.POSITIVE_INFINITY;
  let tie = false;
  for (const c of candidates) {
    const dist = editDistance(w, c.toLowerCase());
    if (dist < bestD) {
      [best, bestD, tie] = [c, dist, false];
    } else if (dist === bestD) tie = true;
  }
  return best !== undefined && bestD <= limit && !tie ? best : undefined;
}

const unescapePointer = (seg: string) => seg.replaceAll('~1', '/').replaceAll('~0', '~');

/** An object schema with the properties of every object branch of a union (what `prune` keeps). */
function objectView(s: any): any {
  if (!s?.anyOf) return s;
  const objs = (s.anyOf as any[]).filter((b) => b.type === 'object' && b.properties);
  return objs.length
    ? { type: 'object', properties: Object.assign({}, ...objs.map((b) => b.properties)) }
    : s;
}

/** Field names the schema declares for the object that holds `pointer`; undefined when none are declared. */
export function knownFieldsAt(schema: TSchema, pointer: string): string[] | undefined {
  const segs = pointer.split('/').slice(1, -1).map(unescapePointer);
  let s: any = schema;
  for (const seg of segs) {
    s = objectView(s);
    if (s?.type === 'array') s = s.items;
    else if (s?.properties && seg in s.properties) s = s.properties[seg];
    else if (s?.additionalProperties && typeof s.additionalProperties === 'object')
      s = s.additionalProperties;
    else if (s?.patternProperties) s = Object.values(s.patternProperties)[0];
    else return undefined;
  }
  s = objectView(s);
  return s?.properties ? Object.keys(s.properties) : undefined;
}

/** `is not a known field; did you mean "memory"?` when one known field is an obvious slip away. */
export function unknownFieldMessage(
  field: string,
  known: string[] | undefined,
  base = 'is not a known field',
) {
  const near = known && closest(field, known);
  return near ? `${base}; did you mean "${near}"?` : base;
}

/** One issue per unknown field, with a suggestion where it is obvious. */
export function unknownFieldIssues(
  schema: TSchema,
  pointers: string[],
  base = 'is not a known field and was ignored',
): FieldIssue[] {
  return pointers.map((pointer) => ({
    pointer,
    message: unknownFieldMessage(
      unescapePointer(pointer.split('/').at(-1) ?? ''),
      knownFieldsAt(schema, pointer),
      base,
    ),
  }));
}
