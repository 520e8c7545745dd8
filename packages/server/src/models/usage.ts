// Token usage as providers report it, in every shape they use, reduced to {input, output}.

export interface TokenUsage {
  input: number;
  output: number;
}

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined);

/**
 * OpenAI `{prompt_tokens, completion_tokens}`, Anthropic / OpenAI Responses `{input_tokens, output_tokens}`
 * (Anthropic's cache reads and writes are input too), Gemini `{promptTokenCount, candidatesTokenCount}`,
 * Cohere `{tokens|billed_units: {input_tokens, output_tokens}}`. Fields absent stay undefined.
 */
export function normalizeUsage(u: any): Partial<TokenUsage> | undefined {
  if (!u || typeof u !== 'object') return undefined;
  if (u.tokens || u.billed_units) return normalizeUsage(u.tokens ?? u.billed_units);
  const out: Partial<TokenUsage> = {};
  const prompt = num(u.prompt_tokens) ?? num(u.promptTokenCount);
  const inputs = num(u.input_tokens);
  if (prompt !== undefined) out.input = prompt;
  else if (inputs !== undefined)
    out.input = inputs + (num(u.cache_creation_input_tokens) ?? 0) + (num(u.cache_read_input_tokens) ?? 0);
  const output =
    num(u.completion_tokens) ??
    num(u.output_tokens) ??
    (num(u.candidatesTokenCount) !== undefined
      ? num(u.candidatesTokenCount)! + (num(u.thoughtsTokenCount) ?? 0)
      : undefined);
  if (output !== undefined) out.output = output;
  // Embeddings report only prompt_tokens and total_tokens.
  if (out.output === undefined && out.input !== undefined && num(u.total_tokens) !== undefined)
    out.output = Math.max(0, num(u.total_tokens)! - out.input);
  return out.input === undefined && out.output === undefined ? undefined : out;
}

/** The usage object of one parsed provider message or stream event, wherever the provider puts it. */
export function usageIn(data: any): Partial<TokenUsage> | undefined {
  if (!data || typeof data !== 'object') return undefined;
  return normalizeUsage(
    data.usage ?? data.x_groq?.usage ?? data.message?.usage ?? data.response?.usage ?? data.usageMetadata,
  );
}

/** Keeps the largest figure seen per field: streams repeat or grow their counts (Anthropic, Gemini). */
export function mergeUsage(
  acc: Partial<TokenUsage>,
  u: Partial<TokenUsage> | undefined,
): Partial<TokenUsage> {
  if (!u) return acc;
  return {
    input: u.input === undefined ? acc.input : Math.max(acc.input ?? 0, u.input),
    output: u.output === undefined ? acc.output : Math.max(acc.output ?? 0, u.output),
  };
}

const USAGE_KEYS = ['"usage"', '"usageMetadata"'];

/**
 * Finds the last usage object in a JSON text without parsing the whole document (an embeddings answer
 * can be megabytes): from the key, match braces to the end of its object and parse only that.
 */
export function usageInJsonText(text: string): Partial<TokenUsage> | undefined {
  for (const key of USAGE_KEYS) {
    let at = text.lastIndexOf(key);
    while (at >= 0) {
      const open = text.indexOf('{', at + key.length);
      const between = open < 0 ? '' : text.slice(at + key.length, open);
      if (open >= 0 && /^\s*:\s*$/.test(between)) {
        let depth = 0;
        for (let i = open; i < text.length; i++) {
          const c = text.charCodeAt(i);
          if (c === 123) depth++;
          else if (c === 125 && --depth === 0) {
            try {
              return normalizeUsage(JSON.parse(text.slice(open, i + 1)));
            } catch {
              break;
            }
          }
        }
      }
      at = at > 0 ? text.lastIndexOf(key, at - 1) : -1;
    }
  }
  return undefined;
}
