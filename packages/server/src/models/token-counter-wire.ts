// What the main thread and the tokenizer's thread (tokenizer-worker.ts) say to each other: one ask per call
// holding all its texts not already counted, one answer with a count per text. Values only, so the main thread
// can import this without loading the tokenizer.

/**
 * Characters tokenized in one go before other asks queued behind a long one get their turn: about 3 ms of
 * counting. Slices end at whitespace, where BPE pieces start anyway; a text longer than one slice counts the sum
 * of its slices (at most one token per slice away from the whole text's count), as it did on the main thread
 * before decision 065.
 */
export const COUNT_SLICE_CHARS = 64 * 1024;

export interface CountAsk {
  id: number;
  texts: string[];
}

/** The thread's first message says its tables are loaded; then one answer per ask. */
export type CountAnswer = { ready: true } | { id: number; counts: number[] } | { id: number; error: string };
