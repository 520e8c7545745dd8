// Visits the secret values a kind declares (SecretPath) inside a spec, to encrypt, decrypt or redact them.
import type { SecretPath } from './types.js';

/** What a redacted secret reads as. Sent back unchanged on a replace, it keeps the stored value. */
export const REDACTED = '********';

/** One step from the spec down to a secret: the object there, its counterpart in the previous spec, its key. */
export interface TrailStep {
  node: unknown;
  prev: unknown;
  key: string;
}

/** Where a visited secret sits: its SecretPath, the steps from the spec (the spec first) and its own key. */
export interface SecretPlace {
  path: SecretPath;
  trail: TrailStep[];
  key: string;
}

type Visit = (value: string, prev: string | undefined, place: SecretPlace) => string | undefined;

function walk(
  node: unknown,
  prevNode: unknown,
  segs: string[],
  sp: SecretPath,
  fn: Visit,
  trail: TrailStep[],
) {
  if (node === null || typeof node !== 'object') return;
  if (segs.length === 0) {
    const c = node as Record<string, unknown>;
    if (sp.when && !sp.when(c)) return;
    if (sp.valueKey && typeof c[sp.valueKey] === 'string') {
      const prev = (prevNode as Record<string, unknown> | undefined)?.[sp.valueKey];
      const place = { path: sp, trail, key: sp.valueKey };
      const v = fn(c[sp.valueKey] as string, typeof prev === 'string' ? prev : undefined, place);
      if (v === undefined) delete c[sp.valueKey];
      else c[sp.valueKey] = v;
    }
    return;
  }
  const [seg, ...rest] = segs;
  const obj = node as Record<string, unknown>;
  const prevObj = (prevNode ?? {}) as Record<string, unknown>;
  const down = (k: string, v: unknown, pv: unknown) =>
    walk(v, pv, rest, sp, fn, [...trail, { node: v, prev: pv, key: k }]);
  const leaf = (k: string, v: string, pv: unknown) => {
    const out = fn(v, typeof pv === 'string' ? pv : undefined, { path: sp, trail, key: k });
    if (out === undefined) delete obj[k];
    else obj[k] = out;
  };
  if (seg === '*') {
    const entries: [string, unknown][] = Array.isArray(obj)
      ? obj.map((v, i) => [String(i), v])
      : Object.entries(obj);
    for (const [k, v] of entries) {
      // Array elements are matched to the previous spec by `name` (env entries), else `id` (triggers),
      // else position (proxy routing rules); map values by key.
      const pv = Array.isArray(obj) ? previousElement(prevNode, v, Number(k)) : prevObj[k];
      if (rest.length === 0 && !sp.valueKey) {
        if (typeof v === 'string') leaf(k, v, pv);
      } else down(k, v, pv);
    }
    return;
  }
  if (rest.length === 0 && !sp.valueKey) {
    if (typeof obj[seg] === 'string') leaf(seg, obj[seg] as string, prevObj[seg]);
    return;
  }
  down(seg, obj[seg], prevObj[seg]);
}

function previousElement(prevNode: unknown, v: unknown, index: number): unknown {
  if (!Array.isArray(prevNode)) return undefined;
  const e = (v ?? {}) as Record<string, unknown>;
  for (const id of ['name', 'id'])
    if (e[id] !== undefined) return prevNode.find((p) => p?.[id] !== undefined && p[id] === e[id]);
  return prevNode[index];
}

/** Applies `fn` to every secret value of `spec` in place; `prevSpec` supplies the stored value, if any. */
export function visitSecrets(spec: unknown, paths: SecretPath[] | undefined, fn: Visit, prevSpec?: unknown) {
  for (const sp of paths ?? [])
    walk(spec, prevSpec, sp.path, sp, fn, [{ node: spec, prev: prevSpec, key: '' }]);
}

/**
 * The fields deciding where a secret kept by a redacted echo is sent (its SecretPath's `sentTo`) that differ from the
 * stored spec, as `/spec/...` pointers; none when the path declares no destination.
 */
export function movedDestinations(place: SecretPlace): string[] {
  const to = place.path.sentTo;
  const step = to && place.trail[to.at];
  if (!to || !step) return [];
  const base = ['/spec', ...place.trail.slice(1, to.at + 1).map((s) => s.key)].join('/');
  const field = (o: unknown, f: string) => JSON.stringify((o as Record<string, unknown> | undefined)?.[f]);
  return to.fields.filter((f) => field(step.node, f) !== field(step.prev, f)).map((f) => `${base}/${f}`);
}

/** The `/spec/...` pointer of a visited secret. */
export const secretPointer = (place: SecretPlace) =>
  ['/spec', ...place.trail.slice(1).map((s) => s.key), place.key].join('/');

/** The containers of a path's values (`[..., 'secrets', '*']` → each `secrets` object) under `node`, with their key. */
function containers(
  node: unknown,
  segs: string[],
  out: { parent: Record<string, unknown>; key: string }[] = [],
): typeof out {
  if (node === null || typeof node !== 'object') return out;
  const [seg, ...rest] = segs;
  if (rest.length === 1 && rest[0] === '*') {
    if (seg !== '*') out.push({ parent: node as Record<string, unknown>, key: seg });
    return out;
  }
  const obj = node as Record<string, unknown>;
  if (seg === '*') for (const v of Object.values(obj)) containers(v, rest, out);
  else containers(obj[seg], rest, out);
  return out;
}

/** Drops the containers of `omittedOnRead` paths that hold no value any more (what a read leaves out). */
export function dropEmptied(spec: unknown, paths: SecretPath[] | undefined) {
  for (const sp of paths ?? []) {
    if (!sp.omittedOnRead) continue;
    for (const { parent, key } of containers(spec, sp.path)) {
      const c = parent[key];
      if (c && typeof c === 'object' && !Object.keys(c).length) delete parent[key];
    }
  }
}

/**
 * For `omittedOnRead` paths: a container the body leaves out whose counterpart in the stored spec holds values (a
 * read sent back) gets those keys masked, so the write keeps the stored values as it would for a masked echo — and
 * the same rules on where a kept secret may go apply. Array elements are matched as `visitSecrets` matches them.
 */
export function restoreOmitted(spec: unknown, prevSpec: unknown, paths: SecretPath[] | undefined) {
  for (const sp of paths ?? []) {
    if (!sp.omittedOnRead) continue;
    const segs = sp.path.slice(0, -1);
    const key = segs.at(-1)!;
    const fill = (node: unknown, prev: unknown, rest: string[]) => {
      if (node === null || typeof node !== 'object' || prev === null || typeof prev !== 'object') return;
      const obj = node as Record<string, unknown>;
      const pv = prev as Record<string, unknown>;
      if (rest.length === 1) {
        const stored = pv[key];
        if (!(key in obj) && stored && typeof stored === 'object')
          obj[key] = Object.fromEntries(Object.keys(stored).map((k) => [k, REDACTED]));
        return;
      }
      const [seg, ...more] = rest;
      if (seg !== '*') return fill(obj[seg], pv[seg], more);
      if (Array.isArray(obj))
        obj.forEach((v, i) => {
          fill(v, previousElement(prev, v, i), more);
        });
      else for (const [k, v] of Object.entries(obj)) fill(v, pv[k], more);
    };
    fill(spec, prevSpec, segs);
  }
}
