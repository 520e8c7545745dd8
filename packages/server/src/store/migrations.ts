// Ordered schema migrations, one list for both backends: each has its SQLite text (`sql`) and its PostgreSQL text
// (`postgres`), runs once, in its own transaction, and is recorded in `schema_migrations` under the same id.
export interface Migration {
  id: number;
  sql: string;
  postgres: string;
}

export const MIGRATIONS: Migration[] = [
  {
    id: 1,
    sql: `
      CREATE TABLE resources (
        kind TEXT NOT NULL,
        workspace TEXT NOT NULL,
        parent TEXT NOT NULL,
        name TEXT NOT NULL,
        rv INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (kind, workspace, parent, name)
      ) WITHOUT ROWID;
      CREATE TABLE changes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        type TEXT NOT NULL,
        kind TEXT NOT NULL,
        workspace TEXT NOT NULL,
        parent TEXT NOT NULL,
        name TEXT NOT NULL
      );
    `,
    // Names compare bytewise (COLLATE "C") as in SQLite, so list order and the `after` cursor agree across backends.
    // A change row carries the object as written (as it was, for a delete): the other servers' watchers get it
    // from there. `seq` doubles as the resource version; a delete's row also keeps the version it deleted (`rv`).
    postgres: `
      CREATE TABLE resources (
        kind TEXT COLLATE "C" NOT NULL,
        workspace TEXT COLLATE "C" NOT NULL,
        parent TEXT COLLATE "C" NOT NULL,
        name TEXT COLLATE "C" NOT NULL,
        rv BIGINT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (kind, workspace, parent, name)
      );
      CREATE TABLE changes (
        seq BIGSERIAL PRIMARY KEY,
        type TEXT NOT NULL,
        kind TEXT NOT NULL,
        workspace TEXT NOT NULL,
        parent TEXT NOT NULL,
        name TEXT NOT NULL,
        rv BIGINT,
        body TEXT NOT NULL
      );
    `,
  },
];
