// The accounting of one gateway call, closed exactly once when its response closes (finished, failed or
// cut by the client): settle the token reservation with the provider's figures, add a usage sample, count
// the Prometheus series. Nothing here runs before the client has its answer.
import { countInputTokens, estimateInputTokens } from './estimate.js';
import type { ModelGateway } from './index.js';
import type { Reservation } from './token-budget.js';
import { mergeUsage, type TokenUsage } from './usage.js';

/** Bytes of a non-streamed answer per output token, for one cut before its usage arrived. */
const BYTES_PER_OUTPUT_TOKEN = 4;

/** Where the streamed answer's usage is seen (the usage observer or a translation). */
export interface UsageSource {
  usage: Partial<TokenUsage>;
  bytes?: number;
  firstChunkAt?: number;
  /** Output tokens the answer streamed so far (content, tool arguments, reasoning), for a stream cut short. */
  streamedTokens?(): number | undefined;
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
  private estimated?: number;

  constructor(
    private readonly gw: ModelGateway,
    private readonly workspace: string,
    private readonly model: string,
    private readonly keyId: string,
    /** The parsed request body, for an input estimate when needed (a budget, or a provider reporting nothing). */
    private readonly body: unknown,
    private readonly requestModel: string | undefined,
    private readonly producesOutput: boolean,
    private readonly startedAt: number,
  ) {}

  /** The input estimate for a reservation: at once for a short prompt, else counted without holding the loop. */
  estimateInput(): number | Promise<number> {
    if (this.estimated !== undefined) return this.estimated;
    const n = this.body === undefined ? 0 : countInputTokens(this.body, this.requestModel);
    if (typeof n === 'number') {
      this.estimated = n;
      return n;
    }
    return n.then((v) => {
      this.estimated = v;
      return v;
    });
  }

  /** Keeps the call's reservation; one granted after the call already closed is released at once. */
  hold(r: Reservation) {
    if (this.done) this.gw.budget.settle(r, { input: 0, output: 0 });
    else this.reservation = r;
  }

  /** Closes the call's accounting; returns what one log line says about it (undefined when already closed). */
  finish(status: number, completed: boolean): CallSummary | undefined {
    if (this.done) return undefined;
    this.done = true;
    const { gw } = this;
    const ok = status < 400;
    const u = mergeUsage(this.usage ?? {}, this.source?.usage);
    const input =
      u.input ??
      (ok
        ? (this.estimated ??
          (this.body === undefined ? 0 : estimateInputTokens(this.body, this.requestModel)))
        : 0);
    const output = ok && this.producesOutput ? this.outputOf(u, completed) : (u.output ?? 0);
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

  /**
   * Output tokens produced: the provider's final count when the answer completed; for one cut short, what
   * was streamed counted with the tokenizer (a running count such as Anthropic's first `output_tokens: 1`
   * is a floor, not the total), or the bytes of an unparsed answer.
   */
  private outputOf(u: Partial<TokenUsage>, completed: boolean): number {
    if (completed && u.output !== undefined) return u.output;
    const counted =
      this.source?.streamedTokens?.() ?? Math.ceil((this.source?.bytes ?? 0) / BYTES_PER_OUTPUT_TOKEN);
    return Math.max(u.output ?? 0, counted);
  }
}
