// An `http` trigger's `configuration.path`: the agent or function is served also at `{run}/<ws>/<path>` (the
// service's custom trigger paths, e.g. `path = "my/agent"`). Written with or without the leading `/`, as the
// service's manifests do; kept in one canonical form (no leading or trailing `/`) for the address table, where two
// objects of a workspace can never hold one path (store/host-labels.ts).
import type { FieldIssue } from '../errors.js';

/** First path segments the run URL already uses: a custom path under one of them would shadow or be shadowed. */
export const RESERVED_RUN_SEGMENTS = ['agents', 'functions', 'sandboxes', 'previews', 'jobs', 'models'];
/** Segments a path may have: each is one lookup per request that reaches no other address. */
export const MAX_PATH_SEGMENTS = 8;
/** Characters of a path: ample for a readable route. */
export const MAX_PATH_CHARS = 200;
/** Unreserved URL characters only, so the path in a request matches as received (no percent-decoding). */
const SEGMENT = /^[A-Za-z0-9._~-]+$/;

export const canonicalPath = (p: string) => p.replace(/^\/+|\/+$/g, '');

/** The path's own default address (`agents/<name>`): allowed, and served already. */
const ownAddress = (kind: string, name: string) => `${kind === 'Function' ? 'functions' : 'agents'}/${name}`;

/** Why a path cannot be served; undefined when it can. */
export function triggerPathProblem(kind: string, name: string, path: string): string | undefined {
  const p = canonicalPath(path);
  const segs = p.split('/');
  if (!p) return 'must name a path under the workspace, e.g. "my-agent/chat"';
  if (p.length > MAX_PATH_CHARS) return `must be at most ${MAX_PATH_CHARS} characters`;
  if (segs.length > MAX_PATH_SEGMENTS) return `must have at most ${MAX_PATH_SEGMENTS} segments`;
  if (segs.some((s) => !SEGMENT.test(s) || s === '.' || s === '..'))
    return 'segments may hold letters, digits, ".", "_", "~" and "-" only (no empty, "." or ".." segment)';
  if (RESERVED_RUN_SEGMENTS.includes(segs[0]) && p !== ownAddress(kind, name))
    return `must not start with ${segs[0]}/: that part of the run URL serves ${segs[0]} by name`;
  return undefined;
}

/** The canonical extra paths an object is served at: enabled `http` triggers' paths, other than its own address. */
export function triggerPaths(kind: string, name: string, spec: any): string[] {
  const out = new Set<string>();
  for (const t of Array.isArray(spec?.triggers) ? spec.triggers : []) {
    const path = t?.configuration?.path;
    if (t?.type !== 'http' || t.enabled === false || typeof path !== 'string') continue;
    if (triggerPathProblem(kind, name, path)) continue;
    const p = canonicalPath(path);
    if (p !== ownAddress(kind, name)) out.add(p);
  }
  return [...out];
}

/** The validation of every trigger's path (pointers into the whole body). */
export function triggerPathIssues(kind: string, name: string, triggers: any[] | undefined): FieldIssue[] {
  const out: FieldIssue[] = [];
  const seen = new Map<string, number>();
  (triggers ?? []).forEach((t, i) => {
    const path = t?.configuration?.path;
    if (typeof path !== 'string') return;
    const pointer = `/spec/triggers/${i}/configuration/path`;
    const problem = triggerPathProblem(kind, name, path);
    if (problem) {
      out.push({ pointer, message: problem });
      return;
    }
    const p = canonicalPath(path);
    if (t.type === 'http' && seen.has(p))
      out.push({ pointer, message: `duplicates the path of trigger ${seen.get(p)}` });
    if (t.type === 'http') seen.set(p, i);
  });
  return out;
}
