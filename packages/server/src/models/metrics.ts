// Prometheus series of the model gateway, added to the server's registry (api/metrics.ts owns it).
// Labelled children are kept per endpoint and key, so a call costs no label hashing.
import { Counter, Histogram, type Registry } from 'prom-client';

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** Children remembered; past this (many keys) the cache starts over rather than grow. */
const CHILDREN_MAX = 10_000;

export interface CallSeries {
  inputTokens: { inc(n: number): void };
  outputTokens: { inc(n: number): void };
  latency: { observe(s: number): void };
  firstByte: { observe(s: number): void };
  request(status: string): void;
}

export class ModelMetrics {
  private readonly tokens: Counter<'workspace' | 'model' | 'key' | 'direction'>;
  private readonly requests: Counter<'workspace' | 'model' | 'key' | 'status'>;
  private readonly latency: Histogram<'workspace' | 'model'>;
  private readonly firstByte: Histogram<'workspace' | 'model'>;
  private readonly denied: Counter<'workspace' | 'policy'>;
  private readonly children = new Map<string, CallSeries>();

  constructor(registry?: Registry) {
    const registers = registry ? [registry] : [];
    this.tokens = new Counter({
      name: 'berth_model_tokens_total',
      help: 'Tokens through the model gateway by workspace, model endpoint, API key and direction (input|output)',
      labelNames: ['workspace', 'model', 'key', 'direction'] as const,
      registers,
    });
    this.requests = new Counter({
      name: 'berth_model_requests_total',
      help: 'Model gateway calls by workspace, model endpoint, API key and HTTP status (or aborted)',
      labelNames: ['workspace', 'model', 'key', 'status'] as const,
      registers,
    });
    this.latency = new Histogram({
      name: 'berth_model_request_duration_seconds',
      help: 'Model gateway call duration, to the last byte',
      labelNames: ['workspace', 'model'] as const,
      buckets: SECONDS,
      registers,
    });
    this.firstByte = new Histogram({
      name: 'berth_model_time_to_first_byte_seconds',
      help: 'Time from the call to the first byte of the provider answer (first token of a stream)',
      labelNames: ['workspace', 'model'] as const,
      buckets: SECONDS,
      registers,
    });
    this.denied = new Counter({
      name: 'berth_model_policy_denials_total',
      help: 'Calls refused by a maxToken policy before the provider was asked',
      labelNames: ['workspace', 'policy'] as const,
      registers,
    });
  }

  series(workspace: string, model: string, key: string): CallSeries {
    const k = `${workspace}\u0000${model}\u0000${key}`;
    let s = this.children.get(k);
    if (s) return s;
    if (this.children.size >= CHILDREN_MAX) this.children.clear();
    const requests = this.requests;
    // The status varies per call: its child is looked up by label hash once per status, not on every call.
    const byStatus = new Map<string, { inc(): void }>();
    s = {
      inputTokens: this.tokens.labels(workspace, model, key, 'input'),
      outputTokens: this.tokens.labels(workspace, model, key, 'output'),
      latency: this.latency.labels(workspace, model),
      firstByte: this.firstByte.labels(workspace, model),
      request: (status) => {
        let c = byStatus.get(status);
        if (!c) {
          c = requests.labels(workspace, model, key, status);
          byStatus.set(status, c);
        }
        c.inc();
      },
    };
    this.children.set(k, s);
    return s;
  }

  deniedBy(workspace: string, policy: string) {
    this.denied.labels(workspace, policy).inc();
  }
}
