// A provider a model call could not reach (refused, reset, timed out, or at an address the outbound rules close),
// said on the model's object as an event: once a minute at most per model and connection, so a provider that is
// down for an hour under load leaves a line a minute rather than one per call.
import type { ApiError } from '../errors.js';
import type { Resources } from '../store/resources.js';

/** At most one event per model and connection in this long. */
export const UNREACHABLE_EVENT_EVERY_MS = 60_000;

export class UnreachableProviders {
  private readonly last = new Map<string, number>();

  constructor(
    private readonly resources: Resources,
    private readonly now: () => number,
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {}

  /** Records that `connection` of model `name` in `workspace` could not be reached, unless it was said lately. */
  note(workspace: string, name: string, connection: string, err: ApiError, fellBack: boolean): void {
    const key = JSON.stringify([workspace, name, connection]);
    const at = this.now();
    if (at - (this.last.get(key) ?? Number.NEGATIVE_INFINITY) < UNREACHABLE_EVENT_EVERY_MS) return;
    this.last.set(key, at);
    const then = fellBack ? 'the call went on to the next connection' : `the call was answered ${err.status}`;
    const message = `provider unreachable: ${err.detail}; ${then} (said at most once a minute while it lasts)`;
    void this.resources
      .recordEvent({ kind: 'Model', workspace, parent: '', name }, message)
      .catch(this.onError);
  }
}
