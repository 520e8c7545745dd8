// The names of a group of objects (one kind under one workspace and parent), sorted, kept in memory by the SQLite
// store for its lists (decision 099). Reading a page's keys out of SQLite cost a JS string per column per row
// (about 1 µs a row): a page of 20 was most of a list's time. Kept only where this process sees every write (one
// process owns the database), updated at each commit; loaded on a group's first list.

/** Names kept in all; past this, whole groups are forgotten, the first loaded first. */
const NAMES_MAX = 200_000;
/** A group with more names than this is listed from SQLite (its load would hold the event loop). */
const GROUP_MAX = 20_000;

/**
 * Whether JavaScript's order of `s` is SQLite's: strings compare by UTF-16 code unit here and by UTF-8 byte there,
 * which agree below the surrogates. Names are DNS labels almost always; a group holding another name is not kept.
 */
const ordersAsSqlite = (s: string) => !/[\uD800-\uFFFF]/.test(s);

/** The first index in sorted `names` whose name is greater than `after` (or not less, when `inclusive`). */
function indexAfter(names: string[], after: string, inclusive = false) {
  let lo = 0;
  let hi = names.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (names[mid] < after || (!inclusive && names[mid] === after)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export class GroupNames {
  /** By group key (kind, workspace, parent joined as keyString joins them); null: listed from SQLite. */
  private readonly groups = new Map<string, string[] | null>();
  private count = 0;

  /**
   * The names of a page: up to `limit` after `after`, in SQLite's order; undefined when the group is not kept
   * (`load` reads the group's names, sorted, from SQLite; it is called once per group kept).
   */
  page(group: string, after: string | undefined, limit: number | undefined, load: () => string[]) {
    if (after !== undefined && !ordersAsSqlite(after)) return undefined;
    let names = this.groups.get(group);
    if (names === undefined) {
      const loaded = load();
      names = loaded.length <= GROUP_MAX && loaded.every(ordersAsSqlite) ? loaded : null;
      this.set(group, names);
    }
    if (!names) return undefined;
    const start = after === undefined ? 0 : indexAfter(names, after);
    return names.slice(start, limit === undefined ? undefined : start + limit);
  }

  /** A commit wrote `name` into `group`: it now exists (created or replaced) or not (deleted). */
  wrote(group: string, name: string, exists: boolean) {
    const names = this.groups.get(group);
    if (!names) return;
    const i = indexAfter(names, name, true);
    const present = names[i] === name;
    if (exists === present) return;
    if (!exists) {
      names.splice(i, 1);
      this.count--;
      return;
    }
    if (!ordersAsSqlite(name) || names.length >= GROUP_MAX) {
      this.forget(group);
      this.groups.set(group, null);
      return;
    }
    names.splice(i, 0, name);
    this.count++;
    this.bound();
  }

  /** Drops what is kept of `group` (a read found it out of step with the database: it is loaded again). */
  forget(group: string) {
    const names = this.groups.get(group);
    if (names) this.count -= names.length;
    this.groups.delete(group);
  }

  private set(group: string, names: string[] | null) {
    this.groups.set(group, names);
    if (names) this.count += names.length;
    this.bound();
  }

  private bound() {
    for (const [g] of this.groups) {
      if (this.count <= NAMES_MAX) return;
      this.forget(g);
    }
  }
}
