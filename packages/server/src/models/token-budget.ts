// Token budgets of `maxToken` policies: reserve before a provider is asked, settle with its reported usage
// after. Pure and synchronous (the clock is injected), so a reservation is atomic on Node's one thread and
// 100 concurrent requests can never be granted more than a window holds. A durable budget also keeps each
// window within what this server has claimed in the store (`leased`, budget-ledger.ts claims more), so
// servers that die or run side by side never grant more than the limit between them.

export type Granularity = 'minute' | 'hour' | 'day' | 'month';

export interface Limits {
  input?: number;
  output?: number;
  total?: number;
}

/** One policy as the budget sees it: `id` scopes its windows (workspace + policy name). */
export interface BudgetPolicy {
  id: string;
  workspace: string;
  name: string;
  granularity: Granularity;
  /** Window length in granularity units (`step: 5` with `minute` = five-minute windows). */
  step: number;
  limits: Limits;
}

export interface Amount {
  input: number;
  output: number;
}

export interface WindowState {
  policy: string;
  granularity: Granularity;
  step: number;
  start: number;
  end: number;
  limits: Limits;
  used: Amount;
  reserved: Amount;
  /** Durable budgets: tokens of each limited dimension this server holds a claim for in the store. */
  leased?: Limits;
  /** Durable budgets: what every server had claimed in the store when this one last claimed. */
  claimed?: Limits;
}

export interface Reservation {
  readonly id: number;
  readonly amount: Amount;
  /** Keys of the windows holding this reservation. */
  readonly windows: string[];
  settled: boolean;
}

export type ReserveResult =
  | { ok: true; reservation: Reservation }
  | {
      ok: false;
      policy: string;
      /** Which limit would break. */
      dimension: keyof Limits;
      limit: number;
      /** The request alone is larger than the limit: waiting will not help. */
      never: boolean;
      /**
       * Only tokens reserved by calls in flight stand in the way: the call fits once they settle (most
       * reserve more than they use), so a retry soon can succeed. Otherwise it cannot before `windowEnd`.
       */
      inFlight: boolean;
      /** Seconds until the call could succeed: a short wait for calls in flight, else the window's end. */
      retryAfterS: number;
      windowEnd: number;
      /** Durable budgets: the limit has room but this server's claim does not; claim more and ask again. */
      leaseShort?: boolean;
    };

/** What a durable window lacks for a call: per limited dimension, tokens to claim beyond the lease. */
export interface Shortfall {
  policy: BudgetPolicy;
  start: number;
  end: number;
  /** Tokens needed beyond the lease, per dimension (only those short). */
  need: Limits;
  /** Tokens already used or reserved beyond the lease (settled above their reservation), per dimension. */
  over: Limits;
  /** Tokens reserved by this server's calls in flight, per dimension. */
  reserved: Limits;
  /** What every server had claimed when this one last claimed (unknown before its first claim). */
  claimed?: Limits;
}

export const DIMENSIONS = ['input', 'output', 'total'] as const;

/**
 * Seconds a caller refused because of reservations in flight is told to wait. Calls settle when they
 * finish (typically within seconds) and settlement usually frees most of a reservation, so a retry soon can
 * succeed; the clients' own backoff takes over if it does not.
 */
export const IN_FLIGHT_RETRY_S = 1;

const UNIT_MS: Record<Exclude<Granularity, 'month'>, number> = {
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
};

/**
 * The last window computed per granularity and step: every call asks for the current window of each of its
 * policies several times (output room, reserve, top-up), and a month's bounds take two Date computations.
 */
const lastWindow = new Map<string, { start: number; end: number }>();

/**
 * The window holding `nowMs`: epoch-aligned UTC for minute/hour/day, calendar months (UTC) for month. The result
 * is shared between callers: read it, never change it.
 */
export function windowAt(
  granularity: Granularity,
  step: number,
  nowMs: number,
): { start: number; end: number } {
  const k = `${granularity}:${step}`;
  const last = lastWindow.get(k);
  if (last && nowMs >= last.start && nowMs < last.end) return last;
  const w = computeWindow(granularity, step, nowMs);
  if (lastWindow.size >= 64) lastWindow.clear();
  lastWindow.set(k, w);
  return w;
}

function computeWindow(
  granularity: Granularity,
  step: number,
  nowMs: number,
): { start: number; end: number } {
  const n = Math.max(1, Math.floor(step));
  if (granularity === 'month') {
    const d = new Date(nowMs);
    const index = d.getUTCFullYear() * 12 + d.getUTCMonth();
    const first = index - (index % n);
    const start = Date.UTC(Math.floor(first / 12), first % 12, 1);
    const end = Date.UTC(Math.floor((first + n) / 12), (first + n) % 12, 1);
    return { start, end };
  }
  const len = UNIT_MS[granularity] * n;
  const start = Math.floor(nowMs / len) * len;
  return { start, end: start + len };
}

const total = (a: Amount) => a.input + a.output;
const zero = (): Amount => ({ input: 0, output: 0 });

export class TokenBudget {
  private readonly windows = new Map<string, WindowState>();
  /** Open reservations per window key, so a window is not forgotten while a call is in flight. */
  private readonly open = new Map<string, number>();
  private nextId = 1;

  constructor(
    private readonly now: () => number = Date.now,
    /** Each window also stays within its lease (budget-ledger.ts). */
    readonly durable = false,
  ) {}

  /** Reserves `amount` in the current window of every policy, or in none of them. */
  reserve(policies: BudgetPolicy[], amount: Amount): ReserveResult {
    const t = this.now();
    this.forgetOld(t);
    const states: [string, WindowState][] = [];
    for (const p of policies) {
      const w = this.current(p, t);
      for (const dim of DIMENSIONS) {
        const limit = p.limits[dim];
        if (limit === undefined) continue;
        const want = wantOf(amount, dim);
        const held = heldOf(w, dim);
        if (want > 0 && held + want > limit) {
          const used = dim === 'total' ? total(w.used) : w.used[dim];
          const inFlight = used + want <= limit;
          return {
            ok: false,
            policy: p.name,
            dimension: dim,
            limit,
            never: want > limit,
            inFlight,
            retryAfterS: inFlight ? IN_FLIGHT_RETRY_S : Math.max(1, Math.ceil((w.end - t) / 1000)),
            windowEnd: w.end,
          };
        }
      }
      states.push([windowKey(p, w.start), w]);
    }
    if (this.durable)
      for (const [, w] of states)
        for (const dim of DIMENSIONS) {
          if (w.limits[dim] === undefined) continue;
          const want = wantOf(amount, dim);
          if (want > 0 && heldOf(w, dim) + want > (w.leased?.[dim] ?? 0))
            return {
              ok: false,
              policy: w.policy,
              dimension: dim,
              limit: w.limits[dim] as number,
              never: false,
              inFlight: true,
              retryAfterS: IN_FLIGHT_RETRY_S,
              windowEnd: w.end,
              leaseShort: true,
            };
        }
    for (const [k, w] of states) {
      w.reserved.input += amount.input;
      w.reserved.output += amount.output;
      this.windows.set(k, w);
      this.open.set(k, (this.open.get(k) ?? 0) + 1);
    }
    const reservation: Reservation = {
      id: this.nextId++,
      amount: { ...amount },
      windows: states.map(([k]) => k),
      settled: false,
    };
    return { ok: true, reservation };
  }

  /**
   * Output tokens the current window of every policy can still grant to a call of `input` tokens, beside
   * what is used and reserved: the least over output and total limits; Infinity when none limits output.
   * Read and reserved in the same turn of the event loop, it is what `reserve` would grant.
   */
  outputRoom(policies: BudgetPolicy[], input: number): number {
    const t = this.now();
    let room = Number.POSITIVE_INFINITY;
    for (const p of policies) {
      const w = this.current(p, t);
      const { output, total: all } = p.limits;
      if (output !== undefined)
        room = Math.min(room, output - othersOf(w, 'output') - w.used.output - w.reserved.output);
      if (all !== undefined)
        room = Math.min(room, all - othersOf(w, 'total') - total(w.used) - total(w.reserved) - input);
    }
    return Math.max(0, room);
  }

  /**
   * Replaces the reservation by what was really used (the provider's figures). Idempotent. The window
   * the reservation was made in is charged, even when it has ended since (a long stream).
   */
  settle(r: Reservation, actual: Amount): void {
    if (r.settled) return;
    r.settled = true;
    for (const k of r.windows) {
      const w = this.windows.get(k);
      if (!w) continue;
      w.reserved.input -= r.amount.input;
      w.reserved.output -= r.amount.output;
      w.used.input += Math.max(0, actual.input);
      w.used.output += Math.max(0, actual.output);
      const n = (this.open.get(k) ?? 1) - 1;
      if (n > 0) this.open.set(k, n);
      else this.open.delete(k);
    }
  }

  /**
   * Whether a durable window of `policies` has less than `margin(limit)` tokens of its lease left in a dimension
   * whose limit is not wholly claimed yet: `shortfall` with that margin would name it. Allocates nothing, so the
   * check every reserved call makes costs no garbage.
   */
  leaseLow(policies: BudgetPolicy[], margin: (limit: number) => number): boolean {
    const t = this.now();
    for (const p of policies) {
      const w = this.current(p, t);
      for (const dim of DIMENSIONS) {
        const limit = p.limits[dim];
        if (limit === undefined) continue;
        const need = heldOf(w, dim) + margin(limit) - (w.leased?.[dim] ?? 0);
        if (need > 0 && (w.claimed?.[dim] ?? 0) < limit) return true;
      }
    }
    return false;
  }

  /** Durable windows not claimed from yet by this server: their first claim also learns what others hold. */
  unclaimed(policies: BudgetPolicy[]): BudgetPolicy[] {
    const t = this.now();
    return policies.filter((p) => !this.current(p, t).claimed);
  }

  /**
   * What the current durable windows of `policies` lack for `amount` plus `margin(limit)` tokens ahead, per
   * limited dimension. Empty when every lease covers it.
   */
  shortfall(policies: BudgetPolicy[], amount: Amount, margin: (limit: number) => number): Shortfall[] {
    const t = this.now();
    const out: Shortfall[] = [];
    for (const p of policies) {
      const w = this.current(p, t);
      const s: Shortfall = {
        policy: p,
        start: w.start,
        end: w.end,
        need: {},
        over: {},
        reserved: {},
        claimed: w.claimed,
      };
      let short = false;
      for (const dim of DIMENSIONS) {
        const limit = p.limits[dim];
        if (limit === undefined) continue;
        const leased = w.leased?.[dim] ?? 0;
        const held = heldOf(w, dim);
        const need = held + wantOf(amount, dim) + margin(limit) - leased;
        s.reserved[dim] = dim === 'total' ? total(w.reserved) : w.reserved[dim];
        if (held > leased) s.over[dim] = held - leased;
        if (need > 0 || !w.claimed) {
          s.need[dim] = Math.max(0, need);
          short = true;
        }
      }
      if (short) out.push(s);
    }
    return out;
  }

  /** Adds tokens claimed in the store to the lease of `p`'s window starting at `start`, while it lasts. */
  lease(p: BudgetPolicy, start: number, grant: Limits, claimed: Limits): void {
    const t = this.now();
    let w = this.windows.get(windowKey(p, start));
    if (!w) {
      const cur = this.current(p, t);
      if (cur.start !== start) return;
      w = cur;
      this.windows.set(windowKey(p, start), w);
    }
    w.leased ??= {};
    const leased = w.leased;
    for (const dim of DIMENSIONS) {
      const g = grant[dim];
      if (g !== undefined) leased[dim] = (leased[dim] ?? 0) + g;
    }
    w.claimed = { ...claimed };
  }

  /** Leased tokens of `p`'s window at `start` that no call used or holds: what a server stopping gives back. */
  unusedIn(p: BudgetPolicy, start: number): Limits {
    const w = this.windows.get(windowKey(p, start));
    const unused: Limits = {};
    if (!w?.leased || w.end <= this.now()) return unused;
    for (const dim of DIMENSIONS) {
      const l = w.leased[dim];
      if (l !== undefined && l > heldOf(w, dim)) unused[dim] = l - heldOf(w, dim);
    }
    return unused;
  }

  /** The current window of `p` (always, even when unused) and any older one still holding reservations. */
  snapshot(p: BudgetPolicy): WindowState[] {
    const t = this.now();
    this.forgetOld(t);
    const cur = this.current(p, t);
    const prefix = `${p.id}\u0000`;
    const out = new Map<number, WindowState>([[cur.start, cur]]);
    for (const [k, w] of this.windows) if (k.startsWith(prefix)) out.set(w.start, w);
    return [...out.values()].sort((a, b) => a.start - b.start).map((w) => structuredClone(w));
  }

  private current(p: BudgetPolicy, t: number): WindowState {
    const { start, end } = windowAt(p.granularity, p.step, t);
    const k = windowKey(p, start);
    const known = this.windows.get(k);
    if (known) {
      // A policy edited mid-window applies its new limits at once (copied only when they changed).
      const l = known.limits;
      if (l.input !== p.limits.input || l.output !== p.limits.output || l.total !== p.limits.total)
        known.limits = { ...p.limits };
      return known;
    }
    const w: WindowState = {
      policy: p.name,
      granularity: p.granularity,
      step: p.step,
      start,
      end,
      limits: {},
      used: zero(),
      reserved: zero(),
      ...(this.durable ? { leased: {} } : {}),
    };
    w.limits = { ...p.limits };
    return w;
  }

  /** Ended windows with no open reservation are dropped: memory stays proportional to active policies. */
  private forgetOld(t: number) {
    for (const [k, w] of this.windows) if (w.end <= t && !this.open.has(k)) this.windows.delete(k);
  }
}

/** The key of each policy's last window, so a call does not build the same string several times. */
const lastKey = new WeakMap<
  BudgetPolicy,
  { id: string; granularity: Granularity; step: number; start: number; key: string }
>();
const windowKey = (p: BudgetPolicy, start: number) => {
  const last = lastKey.get(p);
  if (
    last &&
    last.start === start &&
    last.id === p.id &&
    last.granularity === p.granularity &&
    last.step === p.step
  )
    return last.key;
  const key = `${p.id}\u0000${p.granularity}\u0000${p.step}\u0000${start}`;
  lastKey.set(p, { id: p.id, granularity: p.granularity, step: p.step, start, key });
  return key;
};

const wantOf = (a: Amount, dim: keyof Limits) => (dim === 'total' ? total(a) : a[dim]);
const heldOf = (w: WindowState, dim: keyof Limits) =>
  dim === 'total' ? total(w.used) + total(w.reserved) : w.used[dim] + w.reserved[dim];
/** Tokens other servers (or earlier runs of this one) had claimed in a durable window when this one last claimed. */
const othersOf = (w: WindowState, dim: keyof Limits) =>
  Math.max(0, (w.claimed?.[dim] ?? 0) - (w.leased?.[dim] ?? 0));
