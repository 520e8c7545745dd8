// The JSON text of GET answers, by object and version: a read of an object nobody wrote since the last read sends
// the same text again, without copying the stored body, making its view and serialising it (decision 083).
import { keyString, type ResourceKey } from '../store/store.js';

/** Texts kept; the oldest are dropped past this many, or past TOTAL_MAX_CHARS characters in all (8 MB of ASCII JSON). */
const TEXTS_MAX = 10_000;
const TOTAL_MAX_CHARS = 8 * 1024 * 1024;
/** A larger answer is not kept (memory): it is made again on each read. */
const TEXT_MAX_CHARS = 16_384;

/**
 * Keyed by the object's whole key (kind, workspace, parent, name) and valid for one version only: a version is the
 * number of the write that made it (store/sqlite.ts), so the same version is the same stored body, and any write
 * (a replace, a status write, a delete and re-create) makes a new one. What the text holds besides the body must be
 * fixed for the server's life: the caller keeps only answers without secrets opened and without fields computed at
 * each read (a kind's `decorate`).
 */
export class AnswerTexts {
  private readonly texts = new Map<string, { version: number; text: string }>();
  private chars = 0;

  /** The text kept for `key` at `version` (the store's current one); undefined when none or another version's. */
  get(key: ResourceKey, version: number | undefined): string | undefined {
    if (version === undefined) return undefined;
    const hit = this.texts.get(keyString(key));
    return hit?.version === version ? hit.text : undefined;
  }

  set(key: ResourceKey, version: number, text: string) {
    const k = keyString(key);
    this.drop(k);
    if (text.length > TEXT_MAX_CHARS) return;
    this.texts.set(k, { version, text });
    this.chars += text.length;
    while (this.texts.size > TEXTS_MAX || this.chars > TOTAL_MAX_CHARS)
      this.drop(this.texts.keys().next().value as string);
  }

  /** How many texts are kept, and their characters in all (for tests of the bounds). */
  size() {
    return { texts: this.texts.size, chars: this.chars };
  }

  private drop(k: string) {
    const old = this.texts.get(k);
    if (!old) return;
    this.chars -= old.text.length;
    this.texts.delete(k);
  }
}
