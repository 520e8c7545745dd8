// Server-sent events, incrementally: bytes in any chunking -> whole events. Used on the side of a stream
// (to observe usage) and by translations; the bytes the client receives are never held back by it.

export interface SseEvent {
  event?: string;
  data: string;
}

/** Feeds arbitrary chunks; returns the events completed by each chunk (per the WHATWG SSE rules). */
export class SseParser {
  private readonly decoder = new TextDecoder();
  private buf = '';
  private event: string | undefined;
  private data: string[] = [];

  push(chunk: Uint8Array | string): SseEvent[] {
    this.buf += typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true });
    const out: SseEvent[] = [];
    let start = 0;
    for (;;) {
      const nl = this.buf.indexOf('\n', start);
      if (nl < 0) break;
      let line = this.buf.slice(start, nl);
      start = nl + 1;
      if (line.endsWith('\r')) line = line.slice(0, -1);
      this.line(line, out);
    }
    this.buf = this.buf.slice(start);
    return out;
  }

  /** Flushes an event the stream ended without a blank line after. */
  end(): SseEvent[] {
    const out: SseEvent[] = [];
    if (this.buf) this.line(this.buf.replace(/\r$/, ''), out);
    this.buf = '';
    this.line('', out);
    return out;
  }

  private line(line: string, out: SseEvent[]) {
    if (line === '') {
      if (this.data.length || this.event !== undefined)
        out.push({ event: this.event, data: this.data.join('\n') });
      this.event = undefined;
      this.data = [];
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
  }
}

/** One event on the wire. */
export function sseFrame(data: string, event?: string): string {
  return `${event ? `event: ${event}\n` : ''}data: ${data}\n\n`;
}
