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
