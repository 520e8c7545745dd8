// One server of a cluster at a time leads a role (the controllers and sweeps, docs/decisions/056-cluster-postgres.md):
// it holds a PostgreSQL advisory lock on a session of its own, so the lock ends with that session: a server killed
// (its socket closes) or cut off from the database (TCP keepalives, and this side's own ping) frees it, and a waiting
// server takes it within about a second. A leader that loses its session does not try to lead again in-process: it
// is fenced (`onLost`; `berth serve` exits so its supervisor restarts it as a follower), because the role's parts
// are not built to stop and start again and two leaders must not act at once. Between the session's loss and the
// leader noticing it, the role's writes are refused by the database (`fence`, docs/decisions/068-leader-fence.md),
// and the first refusal ends the lead at once. On SQLite the one server leads.
import { randomInt } from 'node:crypto';
import pg from 'pg';
import { LEADER_MARK } from '../store/store.js';

/**
 * The lock's own session (PostgreSQL): a statement run on it lands only while this server holds the lead, since the
 * lock is freed only once the session ended, after its last transaction. What a role writes about the lead outside
 * the store (the `nodes` table's claims) runs there (docs/decisions/080-leader-session-mark.md). Its queries queue
 * behind the leader's own checks, which may run between two statements of the role's: a role runs single statements
 * there, never a transaction.
 */
export type LeadSession = pg.ClientBase;

export interface Role {
  /** Starts acting; called at most once. `session`: the lock's own session on PostgreSQL, none on SQLite. */
  start(session?: LeadSession): Promise<void>;
  /** Stops acting (on close, and when fenced). */
  stop(): Promise<void>;
  /**
   * After `stop`, when this server gives the role up because it was drained, before its lock is freed: whatever the
   * role left running here goes, for the next leader to start again. `session` as for `start`: if it ended while the
   * role stopped (the lead may be another server's already), what runs on it fails.
   */
  handOver?(session?: LeadSession): Promise<void>;
}

/** The one role of a cluster today: every controller and sweep (docs/decisions/056-cluster-postgres.md). */
export const CONTROLLERS = 'controllers';

/**
 * What a leader's writes are fenced on: its role's advisory lock (the 64-bit key, decimal), its session's pid, and
 * the session's mark (the second key of a two-key advisory lock the session took with the lead): a pid alone could be
 * the next leader's, should the database give its session the same one (docs/decisions/080-leader-session-mark.md).
 */
export interface LeaderFence {
  lock: string;
  pid: number;
  mark: number;
}

/** Why a leader gave its role up: an operator drained its node (`berth node drain`). */
export class DrainedError extends Error {}

export interface Leadership {
  /**
   * Runs `role` once this server holds `name`'s lock (at once on SQLite). Resolves after the first try: with the role
   * started when the lock was free, else at once (the role starts later, if this server ever takes the lock).
   */
  lead(name: string, role: Role): Promise<void>;
  /** Names of the roles this server leads now. */
  leads(): string[];
  /**
   * The fence of `name`'s writes while this server leads it (and until its role stopped, on a clean close);
   * undefined otherwise, and at once when the lead is lost. Always undefined on SQLite, whose one server needs none.
   */
  fence(name: string): LeaderFence | undefined;
  /** The database refused a write fenced on `name`'s lock: the lead is lost, and the role stops now. */
  refused(name: string, err: unknown): void;
  close(): Promise<void>;
}

export function soleLeadership(): Leadership {
  const roles = new Map<string, { role: Role; started: Promise<void> }>();
  return {
    lead(name, role) {
      const started = role.start();
      roles.set(name, { role, started });
      return started;
    },
    leads: () => [...roles.keys()],
    fence: () => undefined,
    refused: () => undefined,
    async close() {
      for (const r of roles.values()) {
        await r.started.catch(() => undefined);
        await r.role.stop();
      }
    },
  };
}

export interface PostgresLeadershipOptions {
  url: string;
  /** How often a follower tries for the lock. */
  retryMs?: number;
  /** How often a leader checks its session (default `retryMs`); a refused write ends the lead sooner. */
  checkMs?: number;
  /**
   * The leader lost its session, or gave the role up because its node was drained (a DrainedError): it has stopped
   * acting and must not act again.
   */
  onLost: (name: string, err: unknown) => void;
  /** Whether this server may lead now (false while its node is drained), asked on the role's session. */
  mayLead?: (session: pg.ClientBase) => Promise<boolean>;
  warn: (err: unknown, msg: string) => void;
  info: (msg: string) => void;
}

/**
 * The role's lock key: one 64-bit advisory lock per name, in the database's own hash; with the key and this session's
 * pid, which the leader's writes are fenced on.
 */
const LOCK_OF = `SELECT pg_try_advisory_lock(k) AS held, k::text AS lock, pg_backend_pid() AS pid
  FROM (SELECT hashtextextended('berth leader ' || $1, 0) AS k) role`;

/**
 * Marks `session` as the one that took a lead: it takes the two-key advisory lock (`LEADER_MARK`, a random positive
 * 31-bit number) for as long as it lives, and the number goes into the leader's fence. A session given the pid of an
 * ended one does not hold that lock, so the ended session's fence stays refused (decision 080). Taken again with
 * another number in the unlikely case another session holds this one.
 */
export async function markSession(session: pg.ClientBase): Promise<number> {
  for (;;) {
    const mark = randomInt(1, 2 ** 31);
    const { rows } = await session.query<{ taken: boolean }>(
      'SELECT pg_try_advisory_lock($1::int, $2::int) AS taken',
      [LEADER_MARK, mark],
    );
    if (rows[0].taken) return mark;
  }
}

export function postgresLeadership(o: PostgresLeadershipOptions): Leadership {
  const retryMs = o.retryMs ?? 1000;
  const checkMs = o.checkMs ?? retryMs;
  const held = new Set<string>();
  const fences = new Map<string, LeaderFence>();
  const refusals = new Map<string, (err: unknown) => void>();
  const loops: Promise<void>[] = [];
  let closing = false;
  const wakeups = new Set<() => void>();
  const sleep = (ms = retryMs) =>
    new Promise<void>((r) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        wakeups.delete(done);
        r();
      }
      wakeups.add(done);
    });

  const session = async () => {
    const c = new pg.Client({
      connectionString: o.url,
      keepAlive: true,
      query_timeout: Math.max(5 * retryMs, 5000),
    });
    c.on('error', () => undefined); // seen as the next query's failure
    await c.connect();
    // The database notices a vanished server within a few seconds and frees its lock.
    await c.query(
      'SET tcp_keepalives_idle = 2; SET tcp_keepalives_interval = 1; SET tcp_keepalives_count = 3',
    );
    return c;
  };

  const run = async (name: string, role: Role, tried: () => void) => {
    let c: pg.Client | undefined;
    let fence: LeaderFence | undefined;
    // Follower: try for the lock until it is ours or the server closes.
    while (!closing) {
      try {
        c ??= await session();
        if (!o.mayLead || (await o.mayLead(c))) {
          const {
            held: taken,
            lock,
            pid,
          } = (await c.query<{ held: boolean; lock: string; pid: number }>(LOCK_OF, [name])).rows[0];
          if (taken) {
            fence = { lock, pid, mark: await markSession(c) };
            break;
          }
        }
      } catch (err) {
        o.warn(err, `could not try for the ${name} leadership; trying again`);
        await c?.end().catch(() => undefined);
        c = undefined;
      }
      tried();
      await sleep();
    }
    if (closing || !c || !fence) {
      await c?.end().catch(() => undefined);
      tried();
      return;
    }
    held.add(name);
    fences.set(name, fence);
    o.info(`leading ${name}`);
    let lost: unknown;
    const lose = (err: unknown) => {
      lost ??= err;
      for (const w of wakeups) w();
    };
    // The session is gone: nothing of the role is written under this lead any more, even while it stops. (Drained,
    // or a role that failed to start, the lock is still ours until the role stopped.)
    const gone = (err: unknown) => {
      fences.delete(name);
      lose(err);
    };
    refusals.set(name, gone);
    const started = role.start(c);
    started.then(tried, (err) => {
      // A leader that cannot act must not keep the lock from a server that can: it ends as a lost one does.
      lose(err);
      tried();
    });
    // Leader: the session must stay up; a failed ping means the lock may be someone else's already.
    while (!closing && lost === undefined) {
      await sleep(checkMs);
      if (closing || lost !== undefined) break;
      try {
        // Also the session's ping.
        if (o.mayLead && !(await o.mayLead(c)))
          lose(new DrainedError(`this node was drained: it gives up ${name}`));
        else await c.query('SELECT 1');
      } catch (err) {
        gone(err);
        break;
      }
    }
    // While the role stops, a refusal only withdraws the fence: the lead is ending already.
    refusals.set(name, () => fences.delete(name));
    // A drained leader still claims the role while it stops, until the hand-over names it handed over in the same
    // write that drops its claim: in between, its node would read as holding nothing (`berth node drain --wait`).
    const draining = lost instanceof DrainedError;
    if (!draining) held.delete(name);
    await started.catch((err) => o.warn(err, `the ${name} role failed to start`));
    await role.stop().catch((err) => o.warn(err, `the ${name} role failed to stop`));
    // The lock is still ours: nothing the next leader starts can meet what this one leaves.
    if (draining)
      await role.handOver?.(c).catch((err) => o.warn(err, `the ${name} role failed to hand over`));
    held.delete(name);
    refusals.delete(name);
    fences.delete(name);
    await c.end().catch(() => undefined);
    if (lost !== undefined) o.onLost(name, lost);
  };

  return {
    lead(name, role) {
      return new Promise<void>((tried) => {
        loops.push(run(name, role, tried));
      });
    },
    leads: () => [...held],
    fence: (name) => fences.get(name),
    refused: (name, err) => refusals.get(name)?.(err),
    async close() {
      closing = true;
      for (const w of wakeups) w();
      await Promise.all(loops);
    },
  };
}
