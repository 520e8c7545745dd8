// GET /v0/watch as a stream of events: fetch (EventSource cannot send Authorization) and an SSE parser.
import { createParser } from 'eventsource-parser';
import { send } from './client';

export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  kind: string;
  parent: string;
  object: any;
  seq: number;
}

export interface WatchHandlers {
  onEvent(e: WatchEvent): void;
  onSynced?(truncated: string[]): void;
  onError?(err: unknown): void;
}

/** Follows the workspace's changes of `kinds` until `signal` aborts; reconnects after a dropped stream. */
export function watch(
  kinds: string[],
  opts: { initial: boolean },
  h: WatchHandlers,
  signal: AbortSignal,
): void {
  const run = async () => {
    const res = await send('GET', '/v0/watch', {
      query: { kinds: kinds.join(','), follow: true, initial: opts.initial },
      signal,
    });
    const parser = createParser({
      onEvent(ev) {
        const data = JSON.parse(ev.data);
        if (ev.event === 'SYNCED') h.onSynced?.(data.truncated ?? []);
        else if (ev.event === 'ADDED' || ev.event === 'MODIFIED' || ev.event === 'DELETED')
          h.onEvent({ type: ev.event, ...data, seq: Number(ev.id ?? 0) });
      },
    });
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parser.feed(dec.decode(value, { stream: true }));
    }
  };
  const loop = async () => {
    let delay = 1000;
    while (!signal.aborted) {
      try {
        await run();
        delay = 1000;
      } catch (err) {
        if (signal.aborted) return;
        h.onError?.(err);
        delay = Math.min(delay * 2, 15_000);
      }
      if (signal.aborted) return;
      await new Promise((r) => setTimeout(r, delay));
    }
  };
  void loop();
}
