// SQLite backend (better-sqlite3, WAL). Writes are synchronous transactions, so a request either
// commits every op or none; a write is acknowledged only once the WAL holding it is fsync'd, and that fsync runs
// off the event loop (see `write`), so an acknowledged write survives a crash of the process or the machine.
import { closeSync, openSync } from 'node:fs';
import { resolve } from 'node:path';
import Database from 'better-sqlite3';
import { copyJson, copyShallow } from '../kinds/json-values.js';
import { FsyncBatch, type SyncFn } from './fsync-batch.js';
import { GroupNames } from './group-names.js';
import { MIGRATIONS } from './migrations.js';
import {
  type Change,
  EVERY_WORKSPACE,
  groupKeyString,
  type ListQuery,
  type ResourceKey,
  type Row,
  type Store,
  keyString,
  StoreError,
  type StoredObject,
  type WriteOp,
} from './store.js';

/** Rows kept in memory for point reads; the oldest cached row is dropped past this. */
const ROW_CACHE_MAX = 50_000;
/**
 * Prepared list statements kept, by SQL text. A list's SQL varies only with which filters it has (a few dozen
 * shapes; label filters add one clause per label), and preparing it was most of the cost of a list: each policy
 * write lists the models that watch policies (decision 052).
 */
const LIST_STATEMENTS_MAX = 256;
/** Groups (kind, workspace, parent) whose last write is remembered for listVersion; past this all are forgotten. */
const GROUPS_MAX = 100_000;

/** A cached row, with its body parsed on the first read of it: never handed out, only copies of it. */
type CachedRow = Row & { parsed?: Record<string, any> };

/** The object of a row: a copy of its kept parse when it has one (a copy costs well under a parse), else a parse. */
const objectOf = (row: CachedRow): StoredObject => ({
  kind: row.kind,
  workspace: row.workspace,
  parent: row.parent,
  name: row.name,
  resourceVersion: row.rv,
  body: row.parsed ? copyJson(row.parsed) : (JSON.parse(row.body) as Record<string, any>),
});

/** The object of a row with its kept parse itself, for a reader that changes nothing (ListQuery.readOnly). */
const keptObjectOf = (row: CachedRow, body: Record<string, any>): StoredObject => ({
  kind: row.kind,
  workspace: row.workspace,
  parent: row.parent,
  name: row.name,
  resourceVersion: row.rv,
  body,
});

export interface SqliteStoreOptions {
  /** How the WAL is synced (tests hold it back to see what waits for it); fsync on the thread pool by default. */
  sync?: SyncFn;
}

export class SqliteStore implements Store {
  private readonly db: Database.Database;
  private readonly watchers = new Set<(c: Change) => void>();
  private readonly stmts;
  private lastSeq = 0;
  private readonly rows = new Map<string, CachedRow>();
  /**
   * The number of the last commit that wrote into each group (kind, workspace, parent), by the group's key; a group
   * not here had no write since `groupsFloor` (listVersion).
   */
  private readonly groupWrites = new Map<string, number>();
  private groupsFloor = 0;
  private readonly groupNames = new GroupNames();
  private readonly groupStatement: Database.Statement<[string, string, string], string>;
  private readonly listStatements = new Map<string, Database.Statement<unknown[], Row>>();
  private readonly keyStatements = new Map<
    string,
    Database.Statement<unknown[], [string, string, string, number]>
  >();
  private pending: { ops: WriteOp[]; resolve: (o: StoredObject[]) => void; reject: (e: unknown) => void }[] =
    [];
  private readonly groupTx;
  private readonly applyTx;
  /**
   * The rows written by the group being committed, by key (undefined: deleted), before they reach `rows` at its
   * commit: a later write of the same group reads them here, as SQLite would show them inside the transaction.
   */
  private groupRows?: Map<string, CachedRow | undefined>;
  /** Syncs the WAL for committed groups; absent for an in-memory database (nothing to make durable). */
  private readonly walSync?: FsyncBatch;
  private walFd?: number;
  /** Groups committed and waiting for their WAL sync, in commit order. */
  private syncing = new Set<Promise<void>>();

  constructor(file: string, opts: SqliteStoreOptions = {}) {
    this.db = new Database(file);
    // One server process owns the database: exclusive locking keeps the WAL index in heap memory (no shared-memory
    // file, no file lock per read transaction, which dominated point reads) and makes a second server on the same
    // data directory fail at start instead of racing the first.
    this.db.pragma('locking_mode = EXCLUSIVE');
    this.db.pragma('journal_mode = WAL');
    // NORMAL: a commit writes its WAL frames without waiting for the disk, and `write` syncs the WAL on the thread
    // pool before it acknowledges (with FULL each COMMIT held the event loop for its fsync: every request queued
    // behind a write waited for the disk). Checkpoints still sync the WAL before copying it into the database.
    this.db.pragma(`synchronous = ${this.db.memory ? 'FULL' : 'NORMAL'}`);
    if (!this.db.memory) {
      const walPath = `${resolve(file)}-wal`;
      this.walSync = new FsyncBatch(() => {
        this.walFd ??= openSync(walPath, 'r');
        return this.walFd;
      }, opts.sync);
    }
    this.db.pragma('busy_timeout = 5000');
    this.migrate();
    this.stmts = {
      get: this.db.prepare<[string, string, string, string], Row>(
        'SELECT * FROM resources WHERE kind = ? AND workspace = ? AND parent = ? AND name = ?',
      ),
      insert: this.db.prepare(
        'INSERT INTO resources (kind, workspace, parent, name, rv, body) VALUES (?, ?, ?, ?, ?, ?)',
      ),
      update: this.db.prepare(
        'UPDATE resources SET rv = ?, body = ? WHERE kind = ? AND workspace = ? AND parent = ? AND name = ?',
      ),
      delete: this.db.prepare(
        'DELETE FROM resources WHERE kind = ? AND workspace = ? AND parent = ? AND name = ?',
      ),
      saveSeq: this.db.prepare("UPDATE sqlite_sequence SET seq = ? WHERE name = 'changes'"),
    };
    this.groupStatement = this.db
      .prepare<[string, string, string], string>(
        'SELECT name FROM resources WHERE kind = ? AND workspace = ? AND parent = ? ORDER BY name',
      )
      .pluck(true);
    this.lastSeq = this.openSeq();
    this.groupTx = this.db.transaction((fn: () => void) => fn());
    this.applyTx = this.db.transaction((ops: WriteOp[]) => this.applyOps(ops));
  }

  /**
   * Where write numbering resumes. Each write's number (its sequence number, which is the object's version) was once
   * the id of a row it added to the `changes` table; nothing reads that table on SQLite (watchers are in-process), so
   * a write now takes the next number in memory and each group stores the last one taken, in the row SQLite keeps for
   * the table's AUTOINCREMENT (`sqlite_sequence`: documented as writable). Numbers stay strictly increasing across
   * restarts, also on a database written before this, and a write costs one statement fewer (decision 074).
   */
  private openSeq(): number {
    const row = this.db
      .prepare<[], { seq: number }>("SELECT seq FROM sqlite_sequence WHERE name = 'changes'")
      .get();
    if (!row) this.db.prepare("INSERT INTO sqlite_sequence (name, seq) VALUES ('changes', 0)").run();
    // The change rows older servers wrote are a log nothing reads; kept, they would only look current.
    this.db.exec('DELETE FROM changes');
    const { rv } = this.db.prepare<[], { rv: number | null }>('SELECT max(rv) AS rv FROM resources').get()!;
    return Math.max(row?.seq ?? 0, rv ?? 0);
  }

  private migrate() {
    this.db.exec(
      'CREATE TABLE IF NOT EXISTS schema_migrations (id INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)',
    );
    const done = new Set(
      this.db
        .prepare<[], { id: number }>('SELECT id FROM schema_migrations')
        .all()
        .map((r) => r.id),
    );
    for (const m of MIGRATIONS) {
      if (done.has(m.id)) continue;
      this.db.transaction(() => {
        this.db.exec(m.sql);
        this.db
          .prepare('INSERT INTO schema_migrations (id, applied_at) VALUES (?, ?)')
          .run(m.id, new Date().toISOString());
      })();
    }
  }

  async get(key: ResourceKey): Promise<StoredObject | undefined> {
    const k = keyString(key);
    let row = this.rows.get(k);
    if (!row) {
      row = this.stmts.get.get(key.kind, key.workspace, key.parent, key.name);
      if (row) this.remember(k, row);
    }
    if (!row) return undefined;
    // Parsed once per cached row, and each caller gets its own copy (a copy costs well under a parse: decision 066).
    row.parsed ??= JSON.parse(row.body) as Record<string, any>;
    return objectOf(row);
  }

  versionOf(key: ResourceKey): number | undefined {
    return this.rows.get(keyString(key))?.rv;
  }

  listVersion(group: { kind: string; workspace: string; parent: string }): number {
    return this.groupWrites.get(groupKeyString(group)) ?? this.groupsFloor;
  }

  /**
   * Notes a commit's write of the row under `k` (a keyString: its group's key, then the name) for listVersion and the
   * kept group names.
   */
  private wroteInto(k: string, exists: boolean) {
    if (this.groupWrites.size >= GROUPS_MAX) {
      // Forgetting every group at once is safe: each then reads as written now, so every page made before is stale.
      this.groupWrites.clear();
      this.groupsFloor = this.lastSeq;
    }
    const cut = k.lastIndexOf('\u0000');
    const group = k.slice(0, cut);
    this.groupWrites.set(group, this.lastSeq);
    this.groupNames.wrote(group, k.slice(cut + 1), exists);
  }

  /** Rows as last committed, so point reads (every API GET, every auth lookup) skip SQLite. */
  private remember(k: string, row: CachedRow | undefined) {
    this.rows.delete(k);
    if (!row) return;
    this.rows.set(k, row);
    if (this.rows.size > ROW_CACHE_MAX) this.rows.delete(this.rows.keys().next().value as string);
  }

  async list(q: ListQuery) {
    return this.listKept(q) ?? this.listNow(q);
  }

  /**
   * A list of one group (one workspace and parent, no label filter) from its kept names and the row cache, as last
   * committed: `list` runs outside any transaction. Undefined when the group's names are not kept.
   */
  private listKept(q: ListQuery): StoredObject[] | undefined {
    const { kind, workspace, parent } = q;
    if (typeof workspace !== 'string' || parent === undefined) return undefined;
    if (q.labels && Object.keys(q.labels).length) return undefined;
    const group = groupKeyString({ kind, workspace, parent });
    const names = this.groupNames.page(group, q.after, q.limit, () =>
      this.groupStatement.all(kind, workspace, parent),
    );
    if (!names) return undefined;
    const out: StoredObject[] = [];
    for (const name of names) {
      const k = `${group}\u0000${name}`;
      let row = this.rows.get(k);
      if (!row) {
        row = this.stmts.get.get(kind, workspace, parent, name);
        if (!row) {
          // Out of step with the database (not expected: every commit updates both): read again from SQLite.
          this.groupNames.forget(group);
          return undefined;
        }
        this.remember(k, row);
      }
      row.parsed ??= JSON.parse(row.body) as Record<string, any>;
      out.push(q.readOnly ? keptObjectOf(row, row.parsed) : objectOf(row));
    }
    return out;
  }

  /** A list as the current transaction (or the last commit) sees it. */
  private listNow(q: ListQuery): StoredObject[] {
    const where = ['kind = ?'];
    const args: unknown[] = [q.kind];
    if (typeof q.workspace === 'string') {
      where.push('workspace = ?');
      args.push(q.workspace);
    } else if (q.workspace !== EVERY_WORKSPACE) throw new Error(`a list of ${q.kind} names no workspace`);
    if (q.parent !== undefined) {
      where.push('parent = ?');
      args.push(q.parent);
    }
    if (q.after !== undefined) {
      where.push('name > ?');
      args.push(q.after);
    }
    for (const [k, v] of Object.entries(q.labels ?? {})) {
      where.push("json_extract(body, '$.metadata.labels.' || json_quote(?)) = ?");
      args.push(k, v);
    }
    let tail = `FROM resources WHERE ${where.join(' AND ')} ORDER BY name, workspace, parent`;
    if (q.limit !== undefined) {
      tail += ' LIMIT ?';
      args.push(q.limit);
    }
    // The keys and versions first: when the row cache holds every row at the version listed (a row's version is
    // its write's number, so the same version is the same body), the bodies come from there, copied from the parse
    // it keeps. Reading the body text of each row out of SQLite and parsing it was most of a list's time (decision
    // 074). Any row missing from the cache (or changed by the transaction under way) and the rows are read whole.
    // Rows as arrays (better-sqlite3's raw mode): no object per row, about half the cost of this read.
    const keys = this.keyStatement(`SELECT workspace, parent, name, rv ${tail}`).all(...args);
    const cached: CachedRow[] = [];
    for (const [workspace, parent, name, rv] of keys) {
      const c = this.rows.get(keyString({ kind: q.kind, workspace, parent, name }));
      if (c?.rv !== rv) break;
      cached.push(c);
    }
    if (cached.length === keys.length)
      return cached.map((c) => {
        c.parsed ??= JSON.parse(c.body) as Record<string, any>;
        return q.readOnly ? keptObjectOf(c, c.parsed) : objectOf(c);
      });
    return this.listStatement(`SELECT * ${tail}`)
      .all(...args)
      .map(objectOf);
  }

  private keyStatement(sql: string): Database.Statement<unknown[], [string, string, string, number]> {
    let stmt = this.keyStatements.get(sql);
    if (!stmt) {
      stmt = this.db.prepare<unknown[], [string, string, string, number]>(sql).raw(true);
      if (this.keyStatements.size >= LIST_STATEMENTS_MAX) this.keyStatements.clear();
      this.keyStatements.set(sql, stmt);
    }
    return stmt;
  }

  private listStatement(sql: string): Database.Statement<unknown[], Row> {
    let stmt = this.listStatements.get(sql);
    if (!stmt) {
      stmt = this.db.prepare<unknown[], Row>(sql);
      if (this.listStatements.size >= LIST_STATEMENTS_MAX) this.listStatements.clear();
      this.listStatements.set(sql, stmt);
    }
    return stmt;
  }

  /**
   * Group commit: writes issued in the same turn of the event loop share one transaction, and the groups committed
   * while one WAL fsync runs share the next one. Each caller's ops run in their own savepoint, so one failing write
   * rolls back alone (and is refused at once). A successful write's promise settles, and watchers hear of it, only
   * after the WAL holding it is fsync'd, so an acknowledged write, and anything a controller acts on, is on disk.
   * Between the COMMIT and that fsync other readers (gets, lists) already see the write: only a power loss in that
   * window (the fsync's time, milliseconds) can lose a write someone read; a process crash cannot, the kernel has it.
   */
  write(ops: WriteOp[]): Promise<StoredObject[]> {
    return new Promise((resolve, reject) => {
      this.pending.push({ ops, resolve, reject });
      if (this.pending.length === 1) setImmediate(() => this.flush());
    });
  }

  private flush() {
    const batch = this.pending;
    this.pending = [];
    if (!batch.length) return;
    const outcomes: (
      | { ok: true; out: StoredObject[]; changes: Change[]; rows: Map<string, Row | undefined> }
      | { ok: false; error: unknown }
    )[] = [];
    const groupRows = new Map<string, Row | undefined>();
    this.groupRows = groupRows;
    try {
      this.groupTx.immediate(() => {
        for (const w of batch) {
          try {
            // A write of one object needs no savepoint: every check and its `mutate` run before its first statement
            // writes anything (see applyOps), so a refusal leaves nothing to roll back. Two statements fewer a write.
            const o =
              w.ops.length === 1 && w.ops[0].op !== 'check' ? this.applyOps(w.ops) : this.applyTx(w.ops);
            for (const [k, row] of o.rows) groupRows.set(k, row);
            outcomes.push({ ok: true, ...o });
          } catch (error) {
            outcomes.push({ ok: false, error });
          }
        }
        this.stmts.saveSeq.run(this.lastSeq);
      });
    } catch (error) {
      for (const w of batch) w.reject(error);
      return;
    } finally {
      this.groupRows = undefined;
    }
    const acks: { changes: Change[]; resolve: () => void; reject: (e: unknown) => void }[] = [];
    batch.forEach((w, i) => {
      const o = outcomes[i];
      if (!o.ok) {
        w.reject(o.error);
        return;
      }
      // Reads see the commit at once, as SQLite's own reads do.
      for (const [k, row] of o.rows) {
        this.remember(k, row);
        this.wroteInto(k, row !== undefined);
      }
      acks.push({ changes: o.changes, resolve: () => w.resolve(o.out), reject: w.reject });
    });
    if (!acks.length) return;
    const synced = this.walSync?.durable();
    if (!synced) {
      this.acknowledge(acks);
      return;
    }
    const p = synced.then(
      () => this.acknowledge(acks),
      (err) => this.acknowledge(acks, err),
    );
    this.syncing.add(p);
    void p.finally(() => this.syncing.delete(p));
  }

  /**
   * Tells the watchers of a committed group and settles its writes, once its WAL is synced. Groups are acknowledged
   * in commit order: each waits for an fsync started after its commit, and fsyncs run one at a time. A failed fsync
   * fails the group's writes (committed, but not known to be on disk: the client retries) and still tells the
   * watchers, because readers already see the rows.
   */
  private acknowledge(
    acks: { changes: Change[]; resolve: () => void; reject: (e: unknown) => void }[],
    err?: unknown,
  ) {
    for (const a of acks) {
      for (const c of a.changes) this.notify(c);
      if (err === undefined) a.resolve();
      else a.reject(new Error(`the write was committed but syncing it to disk failed: ${err}`));
    }
  }

  private notify(c: Change) {
    for (const fn of this.watchers) {
      try {
        fn(c);
      } catch {
        // A watcher's failure must not fail a committed write; watchers log their own errors.
      }
    }
  }

  /**
   * A row as the transaction sees it: written earlier by this caller's ops, or by an earlier caller of the group,
   * or as last committed (the row cache holds exactly that: one process owns the database), or read from SQLite.
   * Reading it from memory saves a statement per write (decision 066).
   */
  private current(
    k: ResourceKey,
    ks: string,
    mine: Map<string, CachedRow | undefined>,
  ): CachedRow | undefined {
    if (mine.has(ks)) return mine.get(ks);
    if (this.groupRows?.has(ks)) return this.groupRows.get(ks);
    return this.rows.get(ks) ?? this.stmts.get.get(k.kind, k.workspace, k.parent, k.name);
  }

  /**
   * Applies one caller's ops; run inside the group transaction, in a savepoint when there are several. Each op's
   * checks and new body come before its statements, so a single op that is refused has written nothing.
   */
  private applyOps(ops: WriteOp[]) {
    const out: StoredObject[] = [];
    const changes: Change[] = [];
    const rows = new Map<string, CachedRow | undefined>();
    for (const op of ops) {
      if (op.op === 'check') {
        op.judge(this.listNow(op.list));
        continue;
      }
      // One server, no leases: it holds every object (a fence is for a cluster's nodes).
      if (op.op === 'fence') continue;
      const k = op.key;
      const ks = keyString(k);
      const cur = this.current(k, ks, rows);
      if (op.op === 'create' && cur) throw new StoreError('exists', k);
      if (op.op !== 'create') {
        if (!cur) throw new StoreError('not_found', k);
        if (op.expectVersion !== undefined && op.expectVersion !== cur.rv)
          throw new StoreError('conflict', k);
      }
      // The new body is made before anything is written: a `mutate` that refuses must leave no statement behind.
      const body =
        op.op === 'delete'
          ? ''
          : JSON.stringify('mutate' in op ? op.mutate(objectOf(cur as CachedRow)) : op.body);
      if (typeof body !== 'string') throw new Error(`a write of ${k.kind} ${k.name} has no body`);
      const type = op.op === 'create' ? 'ADDED' : op.op === 'update' ? 'MODIFIED' : 'DELETED';
      const seq = ++this.lastSeq;
      let obj: StoredObject;
      if (op.op === 'delete') {
        this.stmts.delete.run(k.kind, k.workspace, k.parent, k.name);
        obj = objectOf(cur as CachedRow);
        rows.set(ks, undefined);
      } else {
        if (op.op === 'create') this.stmts.insert.run(k.kind, k.workspace, k.parent, k.name, seq, body);
        else this.stmts.update.run(seq, body, k.kind, k.workspace, k.parent, k.name);
        const parsed = JSON.parse(body);
        // A row that was read since its last write (its parse kept) is likely read again: the new one keeps its
        // parse too, so the next read or write of it copies instead of parsing. Others stay text only (memory).
        const hot = (cur as CachedRow | undefined)?.parsed !== undefined;
        // Assigned to a shallow copy of the key, as `{ ...k, resourceVersion, body }` had it (decision 083).
        obj = copyShallow(k) as StoredObject;
        obj.resourceVersion = seq;
        obj.body = hot ? copyJson(parsed) : parsed;
        rows.set(ks, {
          kind: k.kind,
          workspace: k.workspace,
          parent: k.parent,
          name: k.name,
          rv: seq,
          body,
          parsed: hot ? parsed : undefined,
        });
      }
      out.push(obj);
      changes.push({ seq, type, object: obj });
    }
    return { out, changes, rows };
  }

  watch(fn: (c: Change) => void) {
    this.watchers.add(fn);
    return () => {
      this.watchers.delete(fn);
    };
  }

  async close() {
    this.flush();
    while (this.syncing.size) await Promise.all(this.syncing);
    await this.walSync?.idle();
    this.watchers.clear();
    if (this.walFd !== undefined) closeSync(this.walFd);
    this.db.close();
  }
}
