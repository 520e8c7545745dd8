// Sandboxes, previews and workloads answer at path addresses (`/run/...`) on the origin the console and the API are
// served from. A page there may register a service worker, whose scope is its own path; `Service-Worker-Allowed`
// would let it widen that scope to `/`, and a worker controlling `/console/` reads every key typed into the console.
// So no workload answer may carry it (a worker at the root of a host address of its own needs no widening).
import type { IncomingHttpHeaders } from 'node:http';

export const WIDENING_HEADERS = ['service-worker-allowed'] as const;

export function withoutScopeWidening(h: IncomingHttpHeaders): IncomingHttpHeaders {
  for (const name of WIDENING_HEADERS) delete h[name];
  return h;
}
