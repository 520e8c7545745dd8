// Both store backends, for the tests of the Store interface: each test runs once on SQLite and once on PostgreSQL.
// The PostgreSQL cluster is started on first use, once per test file, and stopped when the file's tests end.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { PostgresStore } from '../store/postgres.js';
import { SqliteStore } from '../store/sqlite.js';
import type { Store } from '../store/store.js';
import { startPostgres, type TestPostgres } from './postgres.js';

export interface OpenedStore {
  store: Store;
  /** Another store on the same database (another server of a cluster); undefined for SQLite, which has one. */
  peer(): Promise<Store | undefined>;
  close(): Promise<void>;
}

export interface StoreDriver {
  name: 'sqlite' | 'postgres';
  open(): Promise<OpenedStore>;
}

let cluster: Promise<TestPostgres> | undefined;

/** The file's PostgreSQL cluster, started on first use and stopped after the file's tests. */
export function testPostgres(): Promise<TestPostgres> {
  cluster ??= startPostgres();
  return cluster;
}

// Registered as the test file loads this module, so it runs after the file's last test (not after the first test
// that happens to start the cluster).
after(async () => {
  if (cluster) await (await cluster).stop();
});

export const STORE_DRIVERS: StoreDriver[] = [
  {
    name: 'sqlite',
    async open() {
      const dir = mkdtempSync(join(tmpdir(), 'berth-store-'));
      const store = new SqliteStore(join(dir, 'berth.db'));
      return {
        store,
        peer: async () => undefined,
        async close() {
          await store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  },
  {
    name: 'postgres',
    async open() {
      const url = await (await testPostgres()).database();
      const opened: Store[] = [await PostgresStore.open(url, { pollMs: 200 })];
      return {
        store: opened[0],
        async peer() {
          const s = await PostgresStore.open(url, { pollMs: 200 });
          opened.push(s);
          return s;
        },
        async close() {
          for (const s of opened) await s.close();
        },
      };
    },
  },
];
