// A bounded map whose entries expire a TTL after their last use: the memory of which replica a thread or an MCP
// session was sent to. Bounded so that a client inventing a new thread id per request cannot grow it without
// limit (the least recently used entry goes first); the clock is passed in so tests need no waiting.

interface Entry<V> {
  value: V;
  expiresAt: number;
}

export class ExpiringLru<K, V> {
  // A Map iterates in insertion order: re-inserting on every use keeps the least recently used first.
  private readonly entries = new Map<K, Entry<V>>();

  constructor(
    private readonly maxEntries: number,
    private readonly now: () => number,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** The value, when present and not expired; a hit counts as a use (moved last, TTL restarted by `ttlMs`). */
  get(key: K, ttlMs: number): V | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    const now = this.now();
    this.entries.delete(key);
    if (e.expiresAt <= now) return undefined;
    e.expiresAt = now + ttlMs;
    this.entries.set(key, e);
    return e.value;
  }

  set(key: K, value: V, ttlMs: number): void {
    this.entries.delete(key);
    this.entries.set(key, { value, expiresAt: this.now() + ttlMs });
    // Over the bound: the least recently used goes (one at a time, so a set never scans the map).
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as K);
  }

  delete(key: K): void {
    this.entries.delete(key);
  }
}
