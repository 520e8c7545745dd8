// The JSON text of GET answers, by object and version: a read of an object nobody wrote since the last read sends
// the same text again, without copying the stored body, making its view and serialising it (decision 083). The
// same for list pages, by query and the version of the objects listed (decision 099).
import { keyString, type ResourceKey } from '../store/store.js';

export interface TextBounds {
  /** Texts kept; the oldest are dropped past this many, or past `totalMaxChars` characters in all. */
  textsMax: number;
  totalMaxChars: number;
  /** A larger answer is not kept (memory): it is made again on each read. */
  textMaxChars: number;
}

/** For GET answers: 10,000 texts, 8 MB of ASCII JSON in all, none over 16 Ki characters. */
const ANSWER_BOUNDS: TextBounds = { textsMax: 10_000, totalMaxChars: 8 * 1024 * 1024, textMaxChars: 16_384 };

/** A kept text, with the headers its answer carries besides the type (a list page's next cursor). */
export interface KeptText {
  text: string;
  headers?: Record<string, string>;
}

/**
 * Keyed by the object's whole key (kind, workspace, parent, name) and valid for one version only: a version is the
 * number of the write that made it (store/sqlite.ts), so the same version is the same stored body, and any write
 * (a replace, a status write, a delete and re-create) makes a new one. What the text holds besides the body must be
 * fixed for the server's life: the caller keeps only answers without secrets opened and without fields computed at
 * each read (a kind's `decorate`).
 */
export class AnswerTexts {
  private readonly texts = new Map<string, KeptText & { version: number }>();
  private chars = 0;

  constructor(private readonly bounds: TextBounds = ANSWER_BOUNDS) {}

  /** The text kept for `key` at `version` (the store's current one); undefined when none or another version's. */
  get(key: ResourceKey, version: number | undefined): string | undefined {
    return this.kept(keyString(key), version)?.text;
  }

  set(key: ResourceKey, version: number, text: string) {
    this.keep(keyString(key), version, { text });
  }

  /** As `get`, by a key the caller makes (it must name the workspace), with the headers kept beside the text. */
  kept(k: string, version: number | undefined): KeptText | undefined {
    if (version === undefined) return undefined;
    const hit = this.texts.get(k);
    return hit?.version === version ? hit : undefined;
  }

  keep(k: string, version: number, kept: KeptText) {
    this.drop(k);
    if (kept.text.length > this.bounds.textMaxChars) return;
    this.texts.set(k, { version, ...kept });
    this.chars += kept.text.length;
    while (this.texts.size > this.bounds.textsMax || this.chars > this.bounds.totalMaxChars)
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
