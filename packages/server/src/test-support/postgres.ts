// A PostgreSQL cluster of the test's own: initdb into a temporary directory, `postgres` on a free loopback port,
// stopped (and the directory removed) at the end. One per test file, started once; each test takes a fresh database
// from it. Debian's postgresql-15 (scripts/test.sh installs it); missing, the test fails saying so.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

const BIN = process.env.BERTH_TEST_PG_BIN ?? '/usr/lib/postgresql/15/bin';
/** As root, PostgreSQL refuses to run: it runs as Debian's `postgres` user instead. */
const RUN_AS = 'postgres';

export interface TestPostgres {
  /** A new, empty database; its URL. */
  database(): Promise<string>;
  /** Stops the server (a fast shutdown: every session ends) and starts it again on the same data and port. */
  restart(): Promise<void>;
  /** Stops the server (a fast shutdown) until `up`: the database is out of reach meanwhile. */
  down(): Promise<void>;
  up(): Promise<void>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

function ids(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const uid = Number(execFileSync('id', ['-u', RUN_AS]).toString().trim());
    const gid = Number(execFileSync('id', ['-g', RUN_AS]).toString().trim());
    return { uid, gid };
  } catch {
    throw new Error(
      `running as root, PostgreSQL needs the \`${RUN_AS}\` user to run as: apt-get install postgresql-15 creates it`,
    );
  }
}

let counter = 0;

export interface StartPostgresOptions {
  /**
   * Runs with PostgreSQL's durable defaults (`fsync`, `synchronous_commit`, full page writes on), as a production
   * database: for benchmarks of writes, where the flush is part of what is measured. Tests run without.
   */
  durable?: boolean;
}

export async function startPostgres(opts: StartPostgresOptions = {}): Promise<TestPostgres> {
  if (!existsSync(join(BIN, 'initdb')))
    throw new Error(
      `PostgreSQL 15 is not installed (no ${BIN}/initdb): apt-get install postgresql-15, or run scripts/test.sh, which installs it`,
    );
  const as = ids();
  const dir = mkdtempSync(join(tmpdir(), 'berth-pg-'));
  if (as) chownSync(dir, as.uid, as.gid);
  const data = join(dir, 'data');
  execFileSync(join(BIN, 'initdb'), ['-D', data, '-U', 'berth', '-A', 'trust', '--no-sync', '-E', 'UTF8'], {
    ...as,
    stdio: 'pipe',
    env: { ...process.env, LC_ALL: 'C' },
  });
  const port = await freePort();
  const launch = (): ChildProcess =>
    spawn(
      join(BIN, 'postgres'),
      [
        '-D',
        data,
        '-p',
        String(port),
        '-k',
        dir,
        '-c',
        'listen_addresses=127.0.0.1',
        // A test's database needs no durability across a power cut; it needs to be quick.
        ...(opts.durable
          ? []
          : ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off']),
        '-c',
        'max_connections=200',
      ],
      { ...as, stdio: ['ignore', 'ignore', 'pipe'], detached: false },
    );
  const admin = `postgres://berth@127.0.0.1:${port}/postgres`;
  let child: ChildProcess = launch();
  /** Starts the server and waits until it accepts connections. */
  const run = async () => {
    child = launch();
    await accepting();
  };
  const accepting = async () => {
    let stderr = '';
    child.stderr?.on('data', (d) => {
      stderr += d;
    });
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`postgres exited at start: ${stderr}`);
      const c = new pg.Client({ connectionString: admin });
      try {
        await c.connect();
        await c.end();
        return;
      } catch (e) {
        await c.end().catch(() => undefined);
        if (Date.now() > deadline)
          throw new Error(`postgres did not accept connections in 30 s: ${stderr || e}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  };
  /** A fast shutdown: every session ends. */
  const halt = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGINT');
    await exited;
  };
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  await accepting();
  return {
    async restart() {
      await halt();
      await run();
    },
    down: halt,
    up: run,
    async database() {
      const name = `t${process.pid}_${++counter}`;
      const c = new pg.Client({ connectionString: admin });
      await c.connect();
      await c.query(`CREATE DATABASE ${name}`);
      await c.end();
      return `postgres://berth@127.0.0.1:${port}/${name}`;
    },
    async stop() {
      process.removeListener('exit', killOnExit);
      await halt();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
