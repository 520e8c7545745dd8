// Visits the secret values a kind declares (SecretPath) inside a spec, to encrypt, decrypt or redact them.
import type { SecretPath } from './types.js';

/** What a redacted secret reads as. Sent back unchanged on a replace, it keeps the stored value. */
export const REDACTED = '********';

type Visit = (value: string, prev: string | undefined) => string | undefined;

function walk(node: unknown, prevNode: unknown, segs: string[], sp: SecretPath, fn: Visit) {
  if (node === null || typeof node !== 'object') return;
  if (segs.length === 0) {
    const c = node as Record<string, unknown>;
    if (sp.when && !sp.when(c)) return;
    if (sp.valueKey && typeof c[sp.valueKey] === 'string') {
      const prev = (prevNode as Record<string, unknown> | undefined)?.[sp.valueKey];
      const v = fn(c[sp.valueKey] as string, typeof prev === 'string' ? prev : undefined);
      if (v === undefined) delete c[sp.valueKey];
      else c[sp.valueKey] = v;
    }
    return;
  }
  const [seg, ...rest] = segs;
  const obj = node as Record<string, unknown>;
  const prevObj = (prevNode ?? {}) as Record<string, unknown>;
  if (seg === '*') {
    const entries: [string, unknown][] = Array.isArray(obj)
      ? obj.map((v, i) => [String(i), v])
      : Object.entries(obj);
    for (const [k, v] of entries) {
      // Array elements are matched to the previous spec by `name` (env entries), else `id` (triggers),
      // else position (proxy routing rules); map values by key.
      const pv = Array.isArray(obj) ? previousElement(prevNode, v, Number(k)) : prevObj[k];
      if (rest.length === 0 && !sp.valueKey) {
        if (typeof v === 'string') {
          const out = fn(v, typeof pv === 'string' ? pv : undefined);
          if (out === undefined) delete obj[k];
          else obj[k] = out;
        }
      } else walk(v, pv, rest, sp, fn);
    }
    return;
  }
  if (rest.length === 0 && !sp.valueKey) {
    if (typeof obj[seg] === 'string') {
      const pv = prevObj[seg];
      const out = fn(obj[seg] as string, typeof pv === 'string' ? pv : undefined);
      if (out === undefined) delete obj[seg];
      else obj[seg] = out;
    }
    return;
  }
  walk(obj[seg], prevObj[seg], rest, sp, fn);
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
  for (const sp of paths ?? []) walk(spec, prevSpec, sp.path, sp, fn);
}
