// The leader's fence in SQL (docs/decisions/068-leader-fence.md, 080-leader-session-mark.md), one predicate for the
// store's fenced writes (postgres.ts, postgres-runs.ts) and the node registry's claims of a lead (cluster/nodes.ts).
import { LEADER_MARK } from './store.js';

/**
 * Whether advisory lock `lock` (a bigint key, which PostgreSQL shows as its high and low 32 bits, `objsubid` 1) is
 * granted to the session of backend `pid`, and that session also holds its mark `(LEADER_MARK, mark)` (a two-key
 * lock, `objsubid` 2): a pid names one live session, but a later session given the same pid does not hold the mark.
 * The database's oid is not needed. Each argument is an SQL expression (a parameter, a column); one copy of the lock
 * table is read.
 */
export const leaderHeld = (lock: string, pid: string, mark: string) =>
  `(SELECT count(DISTINCT objsubid) = 2 FROM pg_locks WHERE locktype = 'advisory' AND pid = ${pid} AND granted AND (
    (objsubid = 1 AND classid = ((${lock} >> 32) & 4294967295)::oid AND objid = (${lock} & 4294967295)::oid)
    OR (objsubid = 2 AND classid = ${LEADER_MARK}::oid AND objid = ${mark}::oid)))`;
