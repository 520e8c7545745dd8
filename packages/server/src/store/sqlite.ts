// SQLite backend (better-sqlite3, WAL). Writes are synchronous transactions, so a request either
// commits every op or none; `synchronous=FULL` makes an acknowledged write survive a crash.
import Database from 'better-sqlite3';
import { MIGRATIONS } from './migrations.js';
import {
  type Change,
  type ListQuery,
  type ResourceKey,
  type Store,
  StoreError,
  type StoredObject,
  type WriteOp,
} from './store.js';

/** The change log keeps this many recent rows; watchers are in-process, the log is for debugging. */
const CHANGE_LOG_KEEP = 10_000;

interface Row {
  kind: string;
  workspace: string;
  parent: string;
  name: string;
  rv: number;
  body: string;
}

const toObject = (r: Row): StoredObject => ({
  kind: r.kind,
  workspace: r.workspace,
  parent: r.parent,
  name: r.name,
  resourceVersion: r.rv,
  body: JSON.parse(r.body),
});

export class SqliteStore implements Store {
  private readonly db: Database.Database;
  private readonly watchers = new Set<(c: Change) => void>();
  private readonly stmts;
  private writes = 0;

  constructor(file: string) {
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
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
      delete: this.db.prepare('DELETE FROM resources WHERE kind = ? AND workspace = ? AND parent = ? AND name = ?'),
      change: this.db.prepare(
        'INSERT INTO changes (type, kind, workspace, parent, name) VALUES (?, ?, ?, ?, ?) RETURNING seq',
      ),
      trim: this.db.prepare('DELETE FROM changes WHERE seq < ?'),
    };
  }

  private migrate() {
    this.db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (id INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)');
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
        this.db.prepare('INSERT INTO schema_migrations (id, applied_at) VALUES (?, ?)').run(m.id, new Date().toISOString());
      })();
    }
  }

  async get(key: ResourceKey) {
    const row = this.stmts.get.get(key.kind, key.workspace, key.parent, key.name);
    return row ? toObject(row) : undefined;
  }

  async list(q: ListQuery) {
    const where = ['kind = ?'];
    const args: unknown[] = [q.kind];
    if (q.workspace !== undefined) {
      where.push('workspace = ?');
      args.push(q.workspace);
    }
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
    let sql = `SELECT * FROM resources WHERE ${where.join(' AND ')} ORDER BY name, workspace, parent`;
    if (q.limit !== undefined) {
      sql += ' LIMIT ?';
      args.push(q.limit);
    }
    return this.db
      .prepare<unknown[], Row>(sql)
      .all(...args)
      .map(toObject);
  }

  async write(ops: WriteOp[]) {
    const changes: Change[] = [];
    const run = this.db.transaction(() => {
      const out: StoredObject[] = [];
      for (const op of ops) {
        const k = op.key;
        const cur = this.stmts.get.get(k.kind, k.workspace, k.parent, k.name);
        if (op.op === 'create' && cur) throw new StoreError('exists', k);
        if (op.op !== 'create') {
          if (!cur) throw new StoreError('not_found', k);
          if (op.expectVersion !== undefined && op.expectVersion !== cur.rv) throw new StoreError('conflict', k);
        }
        const type = op.op === 'create' ? 'ADDED' : op.op === 'update' ? 'MODIFIED' : 'DELETED';
        const { seq } = this.stmts.change.get(type, k.kind, k.workspace, k.parent, k.name) as { seq: number };
        let obj: StoredObject;
        if (op.op === 'delete') {
          this.stmts.delete.run(k.kind, k.workspace, k.parent, k.name);
          obj = toObject(cur as Row);
        } else {
          const body = JSON.stringify(op.body);
          if (op.op === 'create') this.stmts.insert.run(k.kind, k.workspace, k.parent, k.name, seq, body);
          else this.stmts.update.run(seq, body, k.kind, k.workspace, k.parent, k.name);
          obj = { ...k, resourceVersion: seq, body: JSON.parse(body) };
        }
        out.push(obj);
        changes.push({ seq, type, object: obj });
      }
      return out;
    });
    const out = run.immediate();
    if (++this.writes % 1000 === 0 && changes.length) this.stmts.trim.run(changes[0].seq - CHANGE_LOG_KEEP);
    for (const c of changes) for (const w of this.watchers) w(c);
    return out;
  }

  watch(fn: (c: Change) => void) {
    this.watchers.add(fn);
    return () => {
      this.watchers.delete(fn);
    };
  }

  async close() {
    this.watchers.clear();
    this.db.close();
  }
}
