// Prometheus series of the model gateway, added to the server's registry (api/metrics.ts owns it).
// A call adds to plain numbers kept per endpoint and key; the counters take them at scrape time and the
// histograms are rendered from them (http/plain-histogram.ts): prom-client hashes a child's labels on every inc
// and observe, five times per call here.
import { Counter, type Metric, type Registry } from 'prom-client';
import { PlainHistogram, type PlainSeries } from '../http/plain-histogram.js';

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** Children remembered; past this (many keys) the cache starts over rather than grow. */
const CHILDREN_MAX = 10_000;

export interface CallSeries {
  inputTokens: { inc(n: number): void };
  outputTokens: { inc(n: number): void };
  latency: PlainSeries;
  firstByte: PlainSeries;
  request(status: string): void;
}

/** A counter child and what was counted for it since the last scrape. */
interface Pending {
  child: { inc(n: number): void };
  n: number;
}

export class ModelMetrics {
  private readonly tokens: Counter<'workspace' | 'model' | 'key' | 'direction'>;
  private readonly requests: Counter<'workspace' | 'model' | 'key' | 'status'>;
  private readonly latency: PlainHistogram;
  private readonly firstByte: PlainHistogram;
  private readonly denied: Counter<'workspace' | 'policy'>;
  private readonly children = new Map<string, CallSeries>();
  /** Counts not yet handed to the counters (at the next scrape, or when the children are dropped). */
  private readonly pending = new Set<Pending>();

  constructor(registry?: Registry) {
    const registers = registry ? [registry] : [];
    const take = () => this.take();
    this.tokens = new Counter({
      name: 'berth_model_tokens_total',
      help: 'Tokens through the model gateway by workspace, model endpoint, API key and direction (input|output)',
      labelNames: ['workspace', 'model', 'key', 'direction'] as const,
      registers,
      collect: take,
    });
    this.requests = new Counter({
      name: 'berth_model_requests_total',
      help: 'Model gateway calls by workspace, model endpoint, API key and HTTP status (or aborted)',
      labelNames: ['workspace', 'model', 'key', 'status'] as const,
      registers,
      collect: take,
    });
    this.latency = new PlainHistogram(
      'berth_model_request_duration_seconds',
      'Model gateway call duration, to the last byte',
      SECONDS,
    );
    this.firstByte = new PlainHistogram(
      'berth_model_time_to_first_byte_seconds',
      'Time from the call to the first byte of the provider answer (first token of a stream)',
      SECONDS,
    );
    for (const h of [this.latency, this.firstByte]) registry?.registerMetric(h as unknown as Metric);
    this.denied = new Counter({
      name: 'berth_model_policy_denials_total',
      help: 'Calls refused by a maxToken policy before the provider was asked',
      labelNames: ['workspace', 'policy'] as const,
      registers,
    });
  }

  /** Hands what was counted since the last time to the counters. */
  private take() {
    for (const p of this.pending) {
      p.child.inc(p.n);
      p.n = 0;
    }
    this.pending.clear();
  }

  private counted(child: { inc(n: number): void }) {
    const p: Pending = { child, n: 0 };
    return (n: number) => {
      if (p.n === 0) this.pending.add(p);
      p.n += n;
    };
  }

  series(workspace: string, model: string, key: string): CallSeries {
    const k = `${workspace}\u0000${model}\u0000${key}`;
    let s = this.children.get(k);
    if (s) return s;
    if (this.children.size >= CHILDREN_MAX) {
      this.take();
      this.children.clear();
    }
    const requests = this.requests;
    // The status varies per call: its child is looked up by label hash once per status, not on every call.
    const byStatus = new Map<string, (n: number) => void>();
    const labels = { workspace, model };
    const hk = `${workspace}\u0000${model}`;
    s = {
      inputTokens: { inc: this.counted(this.tokens.labels(workspace, model, key, 'input')) },
      outputTokens: { inc: this.counted(this.tokens.labels(workspace, model, key, 'output')) },
      latency: this.latency.child(hk, labels),
      firstByte: this.firstByte.child(hk, labels),
      request: (status) => {
        let c = byStatus.get(status);
        if (!c) {
          c = this.counted(requests.labels(workspace, model, key, status));
          byStatus.set(status, c);
        }
        c(1);
      },
    };
    this.children.set(k, s);
    return s;
  }

  deniedBy(workspace: string, policy: string) {
    this.denied.labels(workspace, policy).inc();
  }
}
