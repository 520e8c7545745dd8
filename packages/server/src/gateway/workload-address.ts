// `/run/<ws>/agents/<name>[/<rest>]`, `/run/<ws>/functions/<name>[/<rest>]`, `/run/<ws>/applications/<name>[/<rest>]`,
// and the host forms `agt-<agent>-<ws>`, `mcp-<function>-<ws>` and `app-<application>-<ws>` under
// `<region>.<inference_host>`: the inference addresses of agents, functions and applications (DESIGN.md §4). Matched before the sandbox addresses; names are DNS labels,
// taken as they are; a host label is looked up whole in the address table, never split (decision 016).
import type { ResourceKey } from '../store/store.js';
import { MAX_PATH_SEGMENTS, RESERVED_RUN_SEGMENTS } from '../kinds/trigger-path.js';
import {
  AGENT_LABEL_PREFIX,
  APPLICATION_LABEL_PREFIX,
  FUNCTION_LABEL_PREFIX,
  hostHidesNames,
  matchLabelHost,
  pathLabel,
  RUN_PREFIX,
} from './address.js';

export interface WorkloadAddress {
  kind: 'Agent' | 'Function' | 'Application';
  workspace: string;
  name: string;
  /** The path the app sees, starting with `/`, query included. */
  rest: string;
  /** The trigger path the request came by (canonical), when it did not use the object's own address. */
  path?: string;
  /** Came by this custom domain as its Host (custom-domains.ts): it must still allow the object's workspace. */
  domain?: string;
  /** Came by a host label that shows no name (hostHidesNames): what a refusal calls the address instead. */
  unnamed?: string;
}

const SEGMENTS = { agents: 'Agent', functions: 'Function', applications: 'Application' } as const;

/** Reserved first segments no trigger path can take (the own addresses of agents and functions excepted). */
const NOT_TRIGGER_FIRST = new Set(RESERVED_RUN_SEGMENTS.filter((s) => s !== 'agents' && s !== 'functions'));

export function matchWorkloadPath(url: string): WorkloadAddress | undefined {
  if (!url.startsWith(RUN_PREFIX)) return undefined;
  const wsEnd = url.indexOf('/', RUN_PREFIX.length);
  if (wsEnd <= RUN_PREFIX.length) return undefined;
  const segEnd = url.indexOf('/', wsEnd + 1);
  if (segEnd < 0) return undefined;
  const kind = SEGMENTS[url.slice(wsEnd + 1, segEnd) as keyof typeof SEGMENTS];
  if (!kind) return undefined;
  let nameEnd = segEnd + 1;
  while (nameEnd < url.length && url[nameEnd] !== '/' && url[nameEnd] !== '?') nameEnd++;
  if (nameEnd === segEnd + 1) return undefined;
  const tail = url.slice(nameEnd);
  return {
    kind,
    workspace: url.slice(RUN_PREFIX.length, wsEnd),
    name: url.slice(segEnd + 1, nameEnd),
    rest: tail === '' ? '/' : tail.startsWith('?') ? `/${tail}` : tail,
  };
}

const HOST_PREFIXES = [
  [AGENT_LABEL_PREFIX, 'Agent'],
  [FUNCTION_LABEL_PREFIX, 'Function'],
  [APPLICATION_LABEL_PREFIX, 'Application'],
] as const;

/**
 * The agent or function a Host names (`agt-…`/`mcp-…` under the inference host), the whole URL being the path its
 * app sees. A label no object of that kind holds routes to a name that exists nowhere, so the caller is still
 * asked for a credential before being told it is not found (as sandboxes' host form does).
 */
export function matchWorkloadHost(
  host: string | undefined,
  url: string,
  inferenceHost: string | undefined,
  labels: { resolve(label: string): ResourceKey | undefined },
): WorkloadAddress | undefined {
  if (!inferenceHost || !host) return undefined;
  for (const [prefix, kind] of HOST_PREFIXES) {
    const m = matchLabelHost(host, inferenceHost, prefix);
    if (!m) continue;
    const owner = labels.resolve(m.label);
    const rest = url.startsWith('/') ? url : `/${url}`;
    const unnamed = hostHidesNames(m.label) ? `address ${m.label}` : undefined;
    if (owner?.kind === kind)
      return { kind, workspace: owner.workspace, name: owner.name, rest, ...(unnamed ? { unnamed } : {}) };
    return { kind, workspace: m.label, name: m.label, rest, ...(unnamed ? { unnamed } : {}) };
  }
  return undefined;
}

/**
 * `/run/<ws>/<path>[/<rest>]` where `<path>` is an `http` trigger's path held by an agent or function of `<ws>`
 * (kinds/trigger-path.ts): the longest held prefix wins, and the app sees what follows it, as under its own
 * address. Asked only for URLs no other address took; at most MAX_PATH_SEGMENTS lookups.
 */
export function matchTriggerPath(
  url: string,
  labels: { resolve(label: string): ResourceKey | undefined },
): WorkloadAddress | undefined {
  if (!url.startsWith(RUN_PREFIX)) return undefined;
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  const query = q < 0 ? '' : url.slice(q);
  const wsEnd = path.indexOf('/', RUN_PREFIX.length);
  if (wsEnd <= RUN_PREFIX.length) return undefined;
  const workspace = path.slice(RUN_PREFIX.length, wsEnd);
  const segs = path.slice(wsEnd + 1).split('/');
  // No trigger path starts with a reserved segment other than an object's own address (kinds/trigger-path.ts):
  // model calls, which reach here on every request, skip the lookups.
  if (NOT_TRIGGER_FIRST.has(segs[0])) return undefined;
  for (let n = Math.min(segs.length, MAX_PATH_SEGMENTS); n > 0; n--) {
    const held = segs.slice(0, n).join('/');
    const owner = labels.resolve(pathLabel(workspace, held));
    if (owner?.kind !== 'Agent' && owner?.kind !== 'Function') continue;
    const tail = segs.slice(n).join('/');
    return {
      kind: owner.kind,
      workspace: owner.workspace,
      name: owner.name,
      rest: `/${tail}${query}`,
      path: held,
    };
  }
  return undefined;
}
