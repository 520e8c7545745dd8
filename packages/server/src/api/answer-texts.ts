// The JSON text of GET answers, by object and version: a read of an object nobody wrote since the last read sends
// the same text again, without copying the stored body, making its view and serialising it (decision 083).
import { keyString, type ResourceKey } from '../store/store.js';

/** Texts kept; the oldest is dropped past this. */
const TEXTS_MAX = 10_000;
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

  /** The text kept for `key` at `version` (the store's current one); undefined when none or another version's. */
  get(key: ResourceKey, version: number | undefined): string | undefined {
    if (version === undefined) return undefined;
    const hit = this.texts.get(keyString(key));
    return hit?.version === version ? hit.text : undefined;
  }

  set(key: ResourceKey, version: number, text: string) {
    const k = keyString(key);
    this.texts.delete(k);
    if (text.length > TEXT_MAX_CHARS) return;
    this.texts.set(k, { version, text });
    if (this.texts.size > TEXTS_MAX) this.texts.delete(this.texts.keys().next().value as string);
  }
}
