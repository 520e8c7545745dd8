// The accounting of one gateway call, closed exactly once when its response closes (finished, failed or
// cut by the client): settle the token reservation with the provider's figures, add a usage sample, count
// the Prometheus series. Nothing here runs before the client has its answer.
import type { ModelGateway } from './index.js';
import type { Reservation } from './token-budget.js';
import { mergeUsage, type TokenUsage } from './usage.js';

/** Bytes of streamed answer per output token, for an answer whose provider reported no usage (cut short). */
const BYTES_PER_OUTPUT_TOKEN = 4;

/** Where the streamed answer's usage is seen (the usage observer or a translation). */
export interface UsageSource {
  usage: Partial<TokenUsage>;
  bytes?: number;
  firstChunkAt?: number;
}

/** One model call as logged: figures only, never a body or a key. */
export interface CallSummary {
  model: string;
  status: number | 'aborted';
  inputTokens: number;
  outputTokens: number;
  durationMs: number;
}

export class CallMeter {
  reservation?: Reservation;
  source?: UsageSource;
  usage?: Partial<TokenUsage>;
  firstByteAt?: number;
  private done = false;

  constructor(
    private readonly gw: ModelGateway,
    private readonly workspace: string,
    private readonly model: string,
    private readonly keyId: string,
    /** Estimated input tokens, computed only when needed (a budget, or a provider that reported nothing). */
    private readonly inputEstimate: () => number,
    private readonly producesOutput: boolean,
    private readonly startedAt: number,
  ) {}

  /** Closes the call's accounting; returns what one log line says about it (undefined when already closed). */
  finish(status: number, completed: boolean): CallSummary | undefined {
    if (this.done) return undefined;
    this.done = true;
    const { gw } = this;
    const ok = status < 400;
    const u = mergeUsage(this.usage ?? {}, this.source?.usage);
    const reservedOut = this.reservation?.amount.output ?? Number.MAX_SAFE_INTEGER;
    const input = u.input ?? (ok ? this.inputEstimate() : 0);
    const output =
      u.output ??
      (ok && this.producesOutput
        ? Math.min(reservedOut, Math.ceil((this.source?.bytes ?? 0) / BYTES_PER_OUTPUT_TOKEN))
        : 0);
    if (this.reservation) gw.budget.settle(this.reservation, { input, output });
    const end = gw.now();
    gw.recorder.add({
      workspace: this.workspace,
      model: this.model,
      keyId: this.keyId,
      inputTokens: input,
      outputTokens: output,
      error: !ok || !completed,
      latencyMs: end - this.startedAt,
      at: this.startedAt,
    });
    const series = gw.metrics.series(this.workspace, this.model, this.keyId);
    series.request(completed ? String(status) : 'aborted');
    if (input) series.inputTokens.inc(input);
    if (output) series.outputTokens.inc(output);
    series.latency.observe((end - this.startedAt) / 1000);
    const first = this.firstByteAt ?? this.source?.firstChunkAt;
    if (first !== undefined) series.firstByte.observe((first - this.startedAt) / 1000);
    return {
      model: this.model,
      status: completed ? status : 'aborted',
      inputTokens: input,
      outputTokens: output,
      durationMs: end - this.startedAt,
    };
  }
}
