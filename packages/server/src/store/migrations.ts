// Ordered schema migrations. Each runs once, in its own transaction, recorded in `schema_migrations`.
export interface Migration {
  id: number;
  sql: string;
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
  },
];
