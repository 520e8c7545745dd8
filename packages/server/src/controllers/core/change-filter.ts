// Which store changes are worth a reconcile (decision 079). A kind whose reconciler declares `unread` gets two
// filters: a change that differs from the one before it only in those fields queues nothing, and a change its own
// reconcile wrote while it ran does not queue it again. Every other change, and every change of a kind that declares
// nothing, queues its reconcile as before; timed requeues and the listing at start are untouched.
import { createHash } from 'node:crypto';
import type { Store, StoredObject } from '../../store/store.js';

/**
 * What a reconcile of a kind can act on: the body without the top-level fields in `unread`, hashed (a sandbox's
 * spec can be kilobytes; ten thousand of them are kept). Key order counts: a body rewritten in another order reads
 * as a change, which only costs a reconcile.
 */
export function triggerOf(body: Record<string, unknown>, unread: readonly string[]): string {
  const read: Record<string, unknown> = {};
  for (const k in body) if (!unread.includes(k)) read[k] = body[k];
  return createHash('sha1').update(JSON.stringify(read)).digest('base64');
}

/** The reconcile of one object under way: the versions of its changes held meanwhile, and those it wrote itself. */
interface Run {
  held: number[];
  own: Set<number>;
}

/**
 * The writes each reconcile makes to its own object. A change reaches watchers before the write that made it
 * returns to its writer, so while a reconcile runs its object's changes are held, and at its end only those it did
 * not write itself (a DELETE, a spec change, another writer's status) queue it again.
 */
export class OwnWrites {
  private readonly runs = new Map<string, Run>();

  /**
   * `store` as the reconciler of `kind` writes through it: each object of that kind it writes while that object's
   * reconcile runs is recorded as that reconcile's own. A reconciler writes only its own object of its kind (the
   * sandbox's holds: every write names `keyOf(o)` or `key`), so no reconcile's write is taken for another's.
   */
  store(inner: Store, kind: string, nameOf: (o: StoredObject) => string): Store {
    return {
      get: (key) => inner.get(key),
      list: (q) => inner.list(q),
      watch: (fn) => inner.watch(fn),
      close: () => inner.close(),
      write: async (ops) => {
        const out = await inner.write(ops);
        for (const o of out) if (o.kind === kind) this.runs.get(nameOf(o))?.own.add(o.resourceVersion);
        return out;
      },
    };
  }

  begin(name: string): void {
    this.runs.set(name, { held: [], own: new Set() });
  }

  /** Holds a change of `name` at `version` when its reconcile is under way (true); false: queue it now. */
  hold(name: string, version: number): boolean {
    const run = this.runs.get(name);
    if (!run) return false;
    run.held.push(version);
    return true;
  }

  /** Ends the reconcile of `name`: true when a change held meanwhile was not its own write (reconcile again). */
  end(name: string): boolean {
    const run = this.runs.get(name);
    this.runs.delete(name);
    return !!run?.held.some((v) => !run.own.has(v));
  }
}
