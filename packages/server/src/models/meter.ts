// The accounting of one gateway call, closed exactly once when its response closes (finished, failed or
// cut by the client): settle the token reservation with the provider's figures, add a usage sample, count
// the Prometheus series. Nothing here runs before the client has its answer. A figure the provider did not
// report is counted on the tokenizer's thread first (then the accounting closes a round trip later).
import { countInputTokens, countTextTokens, inputBytesBound } from './estimate.js';
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
  /**
   * The text the answer streamed so far (content, tool arguments, reasoning), for a stream cut short, and the
   * tokens of what streamed beyond the text kept (undefined for an answer that is no stream).
   */
  streamed?(): { text: string; beyondText: number } | undefined;
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
    const n = this.body === undefined ? 0 : countInputTokens(this.body, this.requestModel, this.workspace);
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

  /**
   * Closes the call's accounting; returns what one log line says about it (undefined when already closed), or
   * its promise when a figure the provider did not report must be counted first.
   */
  finish(status: number, completed: boolean): CallSummary | Promise<CallSummary> | undefined {
    if (this.done) return undefined;
    this.done = true;
    const ok = status < 400;
    const u = mergeUsage(this.usage ?? {}, this.source?.usage);
    const input = u.input ?? (ok ? this.inputOf() : 0);
    const output = ok && this.producesOutput ? this.outputOf(u, completed) : (u.output ?? 0);
    if (typeof input === 'number' && typeof output === 'number')
      return this.close(status, completed, input, output);
    const closed = Promise.all([input, output]).then(([i, o]) => this.close(status, completed, i, o));
    const { unsettled } = this.gw;
    unsettled.add(closed);
    const done = () => unsettled.delete(closed);
    closed.then(done, done);
    return closed;
  }

  private close(status: number, completed: boolean, input: number, output: number): CallSummary {
    const { gw } = this;
    const ok = status < 400;
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
   * Input tokens of a call the provider reported none for: the reservation's estimate, else counted now. Past
   * the call, a count the tokenizer's thread cannot give is replaced by the body's UTF-8 size, which no count
   * exceeds: a budget is never charged less than the call may have used.
   */
  private inputOf(): number | Promise<number> {
    if (this.estimated !== undefined || this.body === undefined) return this.estimated ?? 0;
    const n = countInputTokens(this.body, this.requestModel, this.workspace);
    return typeof n === 'number' ? n : n.catch(() => inputBytesBound(this.body));
  }

  /**
   * Output tokens produced: the provider's final count when the answer completed; for one cut short, what
   * was streamed counted with the tokenizer (a running count such as Anthropic's first `output_tokens: 1`
   * is a floor, not the total), or the bytes of an unparsed answer. The streamed text's UTF-8 size stands in
   * for its count when the tokenizer's thread cannot give one.
   */
  private outputOf(u: Partial<TokenUsage>, completed: boolean): number | Promise<number> {
    if (completed && u.output !== undefined) return u.output;
    const floor = u.output ?? 0;
    const streamed = this.source?.streamed?.();
    if (!streamed) return Math.max(floor, Math.ceil((this.source?.bytes ?? 0) / BYTES_PER_OUTPUT_TOKEN));
    const { text, beyondText } = streamed;
    if (!text) return Math.max(floor, beyondText);
    return countTextTokens(text).then(
      (n) => Math.max(floor, n + beyondText),
      () => Math.max(floor, Buffer.byteLength(text) + beyondText),
    );
  }
}
