// Usage per workspace, model endpoint, API key and hour, kept off the request path: calls add to buckets in
// memory, and a timer folds them into the Store once a second as `ModelUsage` records
// (parent = model, name = `<model>.<keyId>.<hour>`), one transaction per flush.
import type { Store, WriteOp } from '../store/store.js';

export const USAGE_KIND = 'ModelUsage';
/** How often buckets are written: a second of usage can be lost in a crash, never a request's latency. */
export const FLUSH_INTERVAL_MS = 1_000;

export interface UsageSample {
  workspace: string;
  model: string;
  keyId: string;
  inputTokens: number;
  outputTokens: number;
  error: boolean;
  latencyMs: number;
  /** When the call started (its hour is the bucket). */
  at: number;
}

export interface UsageRow {
  model: string;
  keyId: string;
  /** Start of the hour, ISO 8601. */
  hour: string;
  inputTokens: number;
  outputTokens: number;
  requests: number;
  errors: number;
  latencyMsSum: number;
}

const HOUR_MS = 3_600_000;

export const hourStart = (t: number) => Math.floor(t / HOUR_MS) * HOUR_MS;
/** `2025-01-15T10`: the hour in a record name. */
const hourTag = (t: number) => new Date(t).toISOString().slice(0, 13);

export class UsageRecorder {
  private pending = new Map<string, { workspace: string; row: UsageRow }>();
  private timer?: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: Store,
    private readonly onError: (err: unknown) => void = () => {},
  ) {}

  start() {
    this.timer = setInterval(() => void this.flush(), FLUSH_INTERVAL_MS);
    this.timer.unref();
  }

  add(s: UsageSample) {
    const hour = hourStart(s.at);
    const k = `${s.workspace}\u0000${s.model}\u0000${s.keyId}\u0000${hour}`;
    let b = this.pending.get(k);
    if (!b) {
      b = {
        workspace: s.workspace,
        row: {
          model: s.model,
          keyId: s.keyId,
          hour: new Date(hour).toISOString(),
          inputTokens: 0,
          outputTokens: 0,
          requests: 0,
          errors: 0,
          latencyMsSum: 0,
        },
      };
      this.pending.set(k, b);
    }
    b.row.inputTokens += s.inputTokens;
    b.row.outputTokens += s.outputTokens;
    b.row.requests += 1;
    b.row.errors += s.error ? 1 : 0;
    b.row.latencyMsSum += s.latencyMs;
  }

  /** Writes what is pending; flushes run one after another, so counts are never lost to a race. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.write()).catch(this.onError);
    return this.flushing;
  }

  async close() {
    if (this.timer) clearInterval(this.timer);
    await this.flush();
  }

  private async write() {
    if (!this.pending.size) return;
    const batch = this.pending;
    this.pending = new Map();
    const ops: WriteOp[] = [];
    for (const { workspace, row } of batch.values()) {
      const key = {
        kind: USAGE_KIND,
        workspace,
        parent: row.model,
        name: `${row.model}.${row.keyId}.${hourTag(Date.parse(row.hour))}`,
      };
      const cur = await this.store.get(key);
      if (!cur) {
        ops.push({ op: 'create', key, body: row });
        continue;
      }
      const b = cur.body as UsageRow;
      const body: UsageRow = {
        ...b,
        inputTokens: b.inputTokens + row.inputTokens,
        outputTokens: b.outputTokens + row.outputTokens,
        requests: b.requests + row.requests,
        errors: b.errors + row.errors,
        latencyMsSum: b.latencyMsSum + row.latencyMsSum,
      };
      ops.push({ op: 'update', key, body, expectVersion: cur.resourceVersion });
    }
    try {
      await this.store.write(ops);
    } catch (err) {
      // Put the counts back so the next flush retries them.
      for (const [k, v] of batch) {
        const p = this.pending.get(k);
        if (!p) this.pending.set(k, v);
        else
          for (const f of ['inputTokens', 'outputTokens', 'requests', 'errors', 'latencyMsSum'] as const)
            p.row[f] += v.row[f];
      }
      throw err;
    }
  }

  /** Stored rows of `model` whose hour lies in [from, to). */
  async rows(workspace: string, model: string, from: number, to: number): Promise<UsageRow[]> {
    await this.flush();
    const all = await this.store.list({ kind: USAGE_KIND, workspace, parent: model });
    return all
      .map((o) => o.body as UsageRow)
      .filter((r) => {
        const t = Date.parse(r.hour);
        return t >= hourStart(from) && t < to;
      });
  }
}
