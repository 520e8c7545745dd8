// `/run/<ws>/agents/<name>[/<rest>]` and `/run/<ws>/functions/<name>[/<rest>]`: the inference addresses of agents
// and functions (DESIGN.md §4). Matched before the sandbox addresses; names are DNS labels, taken as they are.
import { RUN_PREFIX } from './address.js';

export interface WorkloadAddress {
  kind: 'Agent' | 'Function';
  workspace: string;
  name: string;
  /** The path the app sees, starting with `/`, query included. */
  rest: string;
}

const SEGMENTS = { agents: 'Agent', functions: 'Function' } as const;

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
