// An `http` or `http-async` trigger's `configuration.path`: the agent or function is served also at
// `{run}/<ws>/<path>` (the service's custom trigger paths, e.g. `path = "my/agent"`); an `http-async` one runs each
// request asynchronously. Written with or without the leading `/`, as the service's manifests do; kept in one
// canonical form (no leading or trailing `/`) for the address table, where two objects of a workspace can never
// hold one path (store/host-labels.ts). A trigger's `authenticationType` decides who may call its own path.
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
/**
 * A path under the object's own address (`agents/<name>/async`, the service's documented http-async example): no
 * other object can be there, so it needs no claim; the own address's routing serves it (`ownPathRoute`).
 */
const underOwn = (kind: string, name: string, p: string) => p.startsWith(`${ownAddress(kind, name)}/`);

/** Why a path cannot be served; undefined when it can. */
export function triggerPathProblem(kind: string, name: string, path: string): string | undefined {
  const p = canonicalPath(path);
  const segs = p.split('/');
  if (!p) return 'must name a path under the workspace, e.g. "my-agent/chat"';
  if (p.length > MAX_PATH_CHARS) return `must be at most ${MAX_PATH_CHARS} characters`;
  if (segs.length > MAX_PATH_SEGMENTS) return `must have at most ${MAX_PATH_SEGMENTS} segments`;
  if (segs.some((s) => !SEGMENT.test(s) || s === '.' || s === '..'))
    return 'segments may hold letters, digits, ".", "_", "~" and "-" only (no empty, "." or ".." segment)';
  if (RESERVED_RUN_SEGMENTS.includes(segs[0]) && p !== ownAddress(kind, name) && !underOwn(kind, name, p))
    return `must not start with ${segs[0]}/: that part of the run URL serves ${segs[0]} by name`;
  return undefined;
}

/** Trigger types that serve requests at a path (the others are schedules). */
const isHttpTrigger = (t: any) => t?.type === 'http' || t?.type === 'http-async';

/** How the gateway serves one trigger path. */
export interface TriggerRoute {
  /** The trigger's id: an http-async one's callback is its own. */
  trigger?: string;
  /** `http-async`: every request runs asynchronously, as `?async=true` does. */
  async: boolean;
  /** `configuration.authenticationType`: `public` serves without a credential, `private` asks for one; unset, `spec.public` decides. */
  public?: boolean;
}

/** The canonical extra paths an object is served at and how: enabled http(-async) triggers' paths, other than its own address. */
export function triggerRoutes(kind: string, name: string, spec: any): Record<string, TriggerRoute> {
  const out: Record<string, TriggerRoute> = {};
  for (const t of Array.isArray(spec?.triggers) ? spec.triggers : []) {
    const c = t?.configuration;
    const path = c?.path;
    if (!isHttpTrigger(t) || t.enabled === false || typeof path !== 'string') continue;
    if (triggerPathProblem(kind, name, path)) continue;
    const p = canonicalPath(path);
    if (p === ownAddress(kind, name) || out[p]) continue;
    const auth = c.authenticationType;
    out[p] = {
      trigger: typeof t.id === 'string' ? t.id : undefined,
      async: t.type === 'http-async',
      public: auth === 'public' ? true : auth === 'private' ? false : undefined,
    };
  }
  return out;
}

/** The canonical extra paths an object is served at that the address table holds (not those under its own address). */
export const triggerPaths = (kind: string, name: string, spec: any): string[] =>
  Object.keys(triggerRoutes(kind, name, spec)).filter((p) => !underOwn(kind, name, p));

/**
 * The trigger routes under the object's own address, keyed by what follows it (`/async`); undefined when there is
 * none, so the own address's hot path pays one property read.
 */
export function ownTriggerRoutes(
  kind: string,
  name: string,
  routes: Record<string, TriggerRoute>,
): Record<string, TriggerRoute> | undefined {
  const own = ownAddress(kind, name);
  const out = Object.entries(routes)
    .filter(([p]) => underOwn(kind, name, p))
    .map(([p, r]) => [p.slice(own.length), r] as const);
  return out.length ? Object.fromEntries(out) : undefined;
}

/** The longest trigger route of `own` that `rest` (the path after the own address, query included) is at or under. */
export function ownPathRoute(
  own: Record<string, TriggerRoute>,
  rest: string,
): { sub: string; route: TriggerRoute } | undefined {
  const q = rest.indexOf('?');
  const path = q < 0 ? rest : rest.slice(0, q);
  let best: string | undefined;
  for (const sub in own)
    if ((path === sub || path.startsWith(`${sub}/`)) && (!best || sub.length > best.length)) best = sub;
  return best === undefined ? undefined : { sub: best, route: own[best] };
}

/**
 * The validation of every trigger's path and authenticationType (pointers into the whole body). An
 * authenticationType governs its trigger's own path only: on a trigger without one (or whose path is the object's
 * own address) it would read as making the default address public or private, which `spec.public` decides.
 */
export function triggerPathIssues(kind: string, name: string, triggers: any[] | undefined): FieldIssue[] {
  const out: FieldIssue[] = [];
  const seen = new Map<string, number>();
  (triggers ?? []).forEach((t, i) => {
    const path = t?.configuration?.path;
    const auth = t?.configuration?.authenticationType;
    const at = `/spec/triggers/${i}/configuration`;
    if (
      auth !== undefined &&
      (!isHttpTrigger(t) || typeof path !== 'string' || canonicalPath(path) === ownAddress(kind, name))
    )
      out.push({
        pointer: `${at}/authenticationType`,
        message: isHttpTrigger(t)
          ? `applies to this trigger's own configuration.path, and there is none: the default address follows spec.public`
          : `applies to an http or http-async trigger's path; a ${t?.type} trigger is not called over HTTP`,
      });
    if (typeof path !== 'string') return;
    const pointer = `${at}/path`;
    const problem = triggerPathProblem(kind, name, path);
    if (problem) {
      out.push({ pointer, message: problem });
      return;
    }
    const p = canonicalPath(path);
    if (isHttpTrigger(t) && seen.has(p))
      out.push({ pointer, message: `duplicates the path of trigger ${seen.get(p)}` });
    if (isHttpTrigger(t)) seen.set(p, i);
  });
  return out;
}
