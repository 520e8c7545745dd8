// How deeply a JSON text nests, measured without recursion. Schema checks and clones walk a parsed body
// recursively, so a body nested thousands deep would overflow the stack there (a 500); the API refuses it first.

/**
 * Deepest nesting any request body of the API may have. Berth's own schemas nest about ten deep (a spec's
 * objects inside arrays inside objects); 64 leaves room for free-form fields such as labels and tool schemas.
 */
export const MAX_JSON_DEPTH = 64;

/** True when `text` opens more than `max` arrays or objects inside one another (strings are skipped). */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}
