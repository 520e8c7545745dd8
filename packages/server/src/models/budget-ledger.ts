// Durable token budgets (decision 057). Each window of a `maxToken` policy has one `BudgetWindow` record in the
// store holding the tokens every server has claimed from it, never more than the limit. A server reserves calls
// in memory (token-budget.ts) against what it has claimed, and claims more in blocks: a share of the limit beyond
// what a call needs, read-modify-written in one store transaction, and topped up in the background before the
// block runs out, so a call waits for the store only when its server's claim is short. A server killed with
// SIGKILL loses its unused claim (under-admission bounded by one block), never the tokens it granted: a
// restarted server, or several on one database, cannot grant more than the limit between them.
import type { ResourceKey, Store } from '../store/store.js';
import { keyOf, StoreError } from '../store/store.js';
import {
  type Amount,
  type BudgetPolicy,
  DIMENSIONS,
  IN_FLIGHT_RETRY_S,
  type Limits,
  type Reservation,
  type ReserveResult,
  type Shortfall,
  TokenBudget,
  type WindowState,
} from './token-budget.js';

export const BUDGET_WINDOW_KIND = 'BudgetWindow';
/** A claim takes 1/LEASE_SHARE of the limit beyond what the call needs: the most a killed server leaves unused. */
export const LEASE_SHARE = 20;
/** Claims in a row a call makes when calls beside it keep taking what it claimed, before it is told to retry. */
const CLAIM_ATTEMPTS = 4;

export const blockOf = (limit: number) => Math.max(1, Math.ceil(limit / LEASE_SHARE));
/** A lease with less than this left is topped up in the background. */
const halfBlock = (limit: number) => blockOf(limit) / 2;

type Refusal = Extract<ReserveResult, { ok: false }>;

interface WindowBody {
  policy: string;
  granularity: string;
  step: number;
  start: string;
  end: string;
  limits: Limits;
  claimed: Limits;
}

const windowKeyOf = (p: BudgetPolicy, start: number): ResourceKey => ({
  kind: BUDGET_WINDOW_KIND,
  workspace: p.workspace,
  parent: p.name,
  name: `${p.granularity}.${p.step}.${new Date(start).toISOString()}`,
});

export class BudgetLedger {
  readonly budget: TokenBudget;
  /** Claims run one after another, so each sees what the one before it leased. */
  private chain: Promise<unknown> = Promise.resolve();
  private toppingUp = false;
  /** Windows this server holds a claim in, to give back what is unused when it stops. */
  private readonly held = new Map<string, { p: BudgetPolicy; start: number }>();

  constructor(
    private readonly store: Store,
    private readonly now: () => number = Date.now,
    private readonly onError: (err: unknown) => void = () => {},
  ) {
    this.budget = new TokenBudget(now, true);
  }

  outputRoom(policies: BudgetPolicy[], input: number): number {
    return this.budget.outputRoom(policies, input);
  }

  settle(r: Reservation, actual: Amount): void {
    this.budget.settle(r, actual);
  }

  /**
   * The windows as this server holds them, with what other servers and earlier runs of this one claimed in
   * the current one counted as used (input and output limits; a total-only limit's split is not known).
   */
  async snapshot(p: BudgetPolicy): Promise<WindowState[]> {
    const windows = this.budget.snapshot(p);
    const cur = windows.at(-1);
    if (!cur) return windows;
    const stored = await this.store.get(windowKeyOf(p, cur.start));
    const claimed = (stored?.body as WindowBody | undefined)?.claimed ?? {};
    for (const dim of ['input', 'output'] as const) {
      const others = (claimed[dim] ?? 0) - (cur.leased?.[dim] ?? 0);
      if (others > 0) cur.used[dim] += others;
    }
    return windows;
  }

  /**
   * A window this server has not claimed from yet is claimed from before a call decides its output (what
   * earlier runs and other servers hold lowers the room it has); undefined once every window is known.
   */
  prepare(policies: BudgetPolicy[]): Promise<void> | undefined {
    const fresh = this.budget.unclaimed(policies);
    if (!fresh.length) return undefined;
    return this.claim(fresh, { input: 0, output: 0 }, true).then(() => undefined);
  }

  /** Reserves in memory when the claims cover the call; else claims first (a promise). */
  reserve(policies: BudgetPolicy[], amount: Amount): ReserveResult | Promise<ReserveResult> {
    const r = this.budget.reserve(policies, amount);
    if (r.ok || !r.leaseShort) return this.after(policies, r);
    return this.reserveClaiming(policies, amount);
  }

  /** Gives back what this server claimed and did not use, so another server can (a graceful stop). */
  async close(): Promise<void> {
    await this.chain.catch(() => {});
    for (const { p, start } of this.held.values()) {
      const unused = this.budget.unusedIn(p, start);
      if (!Object.keys(unused).length) continue;
      await this.store
        .write([
          {
            op: 'update',
            key: windowKeyOf(p, start),
            mutate: (cur) => {
              const b = cur.body as WindowBody;
              const claimed = { ...b.claimed };
              for (const dim of DIMENSIONS) {
                const u = unused[dim];
                if (u !== undefined) claimed[dim] = Math.max(0, (claimed[dim] ?? 0) - u);
              }
              return { ...b, claimed };
            },
          },
        ])
        .catch(this.onError);
    }
  }

  private after(policies: BudgetPolicy[], r: ReserveResult): ReserveResult {
    if (r.ok) this.topUp(policies);
    return r;
  }

  private async reserveClaiming(policies: BudgetPolicy[], amount: Amount): Promise<ReserveResult> {
    let r: ReserveResult | undefined;
    for (let i = 0; i < CLAIM_ATTEMPTS; i++) {
      const refused = await this.claim(policies, amount, false);
      if (refused) return refused;
      r = this.budget.reserve(policies, amount);
      if (r.ok || !r.leaseShort) return this.after(policies, r);
    }
    // Calls beside this one took each block it claimed: the limit has room, so a retry soon can succeed.
    return r as Refusal;
  }

  /**
   * When a claim has less than half a block left, the next block is claimed in the background, so the calls
   * after it do not wait for the store.
   */
  private topUp(policies: BudgetPolicy[]) {
    if (this.toppingUp || !this.budget.leaseLow(policies, halfBlock)) return;
    const low = this.budget
      .shortfall(policies, { input: 0, output: 0 }, halfBlock)
      .filter((s) => DIMENSIONS.some((d) => (s.need[d] ?? 0) > 0 && !exhausted(s, d)));
    if (!low.length) return;
    this.toppingUp = true;
    this.claim(
      low.map((s) => s.policy),
      { input: 0, output: 0 },
      true,
    )
      .catch(this.onError)
      .finally(() => {
        this.toppingUp = false;
      });
  }

  private claim(policies: BudgetPolicy[], amount: Amount, ahead: boolean): Promise<Refusal | undefined> {
    const run = this.chain.then(() => this.claimNow(policies, amount, ahead));
    this.chain = run.catch(() => {});
    return run;
  }

  /**
   * Claims, in each window short of `amount`, what it lacks plus a block (`ahead`: a block, and only what
   * the limit has left). A window whose limit cannot cover the call refuses it; what its server already
   * used beyond its claim (calls that settled above their reservation) is claimed all the same, so the
   * store never holds less than was granted.
   */
  private async claimNow(
    policies: BudgetPolicy[],
    amount: Amount,
    ahead: boolean,
  ): Promise<Refusal | undefined> {
    const margin = ahead ? blockOf : () => 0;
    let refusal: Refusal | undefined;
    for (const s of this.budget.shortfall(policies, amount, margin)) {
      const grant = await this.claimIn(s, ahead);
      if (!grant.refused || refusal) continue;
      const { dim, left } = grant.refused;
      const limit = s.policy.limits[dim] as number;
      const want = dim === 'total' ? amount.input + amount.output : amount[dim];
      const inFlight = (s.reserved[dim] ?? 0) >= (s.need[dim] ?? 0) - left;
      refusal = {
        ok: false,
        policy: s.policy.name,
        dimension: dim,
        limit,
        never: want > limit,
        inFlight,
        retryAfterS: inFlight ? IN_FLIGHT_RETRY_S : Math.max(1, Math.ceil((s.end - this.now()) / 1000)),
        windowEnd: s.end,
      };
    }
    return refusal;
  }

  private async claimIn(
    s: Shortfall,
    ahead: boolean,
  ): Promise<{ refused?: { dim: keyof Limits; left: number } }> {
    const { policy: p, start, end } = s;
    const key = windowKeyOf(p, start);
    let refused: { dim: keyof Limits; left: number } | undefined;
    let grant: Limits = {};
    const decide = (cur: WindowBody | undefined): WindowBody => {
      refused = undefined;
      grant = {};
      const claimed: Limits = { ...cur?.claimed };
      for (const dim of DIMENSIONS) {
        const need = s.need[dim];
        const limit = p.limits[dim];
        if (need === undefined || limit === undefined) continue;
        const left = Math.max(0, limit - (claimed[dim] ?? 0));
        if (!ahead && need > left) refused ??= { dim, left };
      }
      for (const dim of DIMENSIONS) {
        const need = s.need[dim];
        const limit = p.limits[dim];
        if (need === undefined || limit === undefined) continue;
        const left = Math.max(0, limit - (claimed[dim] ?? 0));
        const g = refused
          ? (s.over[dim] ?? 0)
          : ahead
            ? Math.min(need, left)
            : Math.min(left, need + blockOf(limit));
        grant[dim] = g;
        claimed[dim] = (claimed[dim] ?? 0) + g;
      }
      return {
        policy: p.name,
        granularity: p.granularity,
        step: p.step,
        start: new Date(start).toISOString(),
        end: new Date(end).toISOString(),
        limits: { ...p.limits },
        claimed,
      };
    };
    for (;;) {
      const cur = await this.store.get(key);
      try {
        const [written] = await this.store.write([
          cur
            ? { op: 'update', key, mutate: (o) => decide(o.body as WindowBody) }
            : { op: 'create', key, body: decide(undefined) },
        ]);
        this.budget.lease(p, start, grant, (written.body as WindowBody).claimed);
        this.held.set(`${p.id}\u0000${start}`, { p, start });
        if (!cur) void this.forgetEnded(p, start);
        return { refused };
      } catch (err) {
        // Another server created the window first (or removed an ended one): read it again.
        if (err instanceof StoreError && (err.reason === 'exists' || err.reason === 'not_found')) continue;
        throw err;
      }
    }
  }

  /** Windows of `p` that have ended are removed when its next window is first claimed from. */
  private async forgetEnded(p: BudgetPolicy, current: number) {
    try {
      const all = await this.store.list({ kind: BUDGET_WINDOW_KIND, workspace: p.workspace, parent: p.name });
      const t = this.now();
      for (const o of all) {
        const end = Date.parse((o.body as WindowBody).end);
        if (end <= t && Date.parse((o.body as WindowBody).start) !== current)
          await this.store
            .write([{ op: 'delete', key: keyOf(o), expectVersion: o.resourceVersion }])
            .catch(() => {});
      }
      for (const [k, h] of this.held) if (h.p.id === p.id && h.start !== current) this.held.delete(k);
    } catch (err) {
      this.onError(err);
    }
  }
}

/** Every token of the window's limit in `dim` is claimed (by this server or others): a top-up would claim none. */
const exhausted = (s: Shortfall, dim: keyof Limits) => {
  const limit = s.policy.limits[dim];
  return limit === undefined || (s.claimed?.[dim] ?? 0) >= limit;
};
