// The output limit of a model call: which fields of a request bound what the provider may generate on each
// API, what the caller asked there, and how the limit Berth reserved for is written back (decision 039).
// Every field an API may honour is read (the largest wins), so a limit in a field the provider ignores
// reserves nothing; the one written is a field the provider is known to honour.
import type { Connection, Provider } from './providers/index.js';

/**
 * The least output Berth gives a call that sets no limit of its own under a budget limiting output. Below it
 * most answers would be cut mid-sentence (two sentences are 40–60 tokens), so the call is refused naming the
 * policy instead; what a window holds under it is a negligible share of any realistic budget.
 */
export const MIN_CAPPED_OUTPUT = 64;

/** Where an API bounds its output. */
interface Shape {
  /** Fields that bound each answer; all are read, the first is the one written unless the provider says. */
  fields: string[];
  /** Fields asking for several answers at once (each may reach the limit). */
  choices: string[];
  /** The object holding them, in each spelling the API accepts (Gemini's generationConfig); absent = top level. */
  within?: string[];
  /** OpenAI's chat format: the fields a provider honours are its own (Provider.chatLimitFields). */
  chat?: boolean;
}

const CHAT: Shape = { fields: ['max_completion_tokens', 'max_tokens'], choices: ['n'], chat: true };
const SHAPES: [RegExp, Shape][] = [
  [/\/chat\/completions$/, CHAT],
  [/\/responses$/, { fields: ['max_output_tokens'], choices: [] }],
  [/\/completions$/, { fields: ['max_tokens'], choices: ['n', 'best_of'] }],
  [/\/messages$/, { fields: ['max_tokens'], choices: [] }],
  // Gemini's native API; Google's JSON parser takes field names in lowerCamel and snake_case alike.
  [
    /:(stream)?generateContent$/i,
    {
      fields: ['maxOutputTokens', 'max_output_tokens'],
      choices: ['candidateCount', 'candidate_count'],
      within: ['generationConfig', 'generation_config'],
    },
  ],
  // Cohere's native chat (v1 and v2).
  [/^\/v[12]\/chat$/, { fields: ['max_tokens'], choices: [] }],
];

/** Chat first without a regex: nearly every call is one (the first entry of SHAPES says the same). */
const shapeOf = (method: string, path: string) =>
  method !== 'POST'
    ? undefined
    : path.endsWith('/chat/completions')
      ? CHAT
      : SHAPES.find(([re]) => re.test(path))?.[1];

/** A count as a provider reads it: an integer, or a string of digits (Python servers coerce those). */
function count(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isInteger(v) && v >= 0 ? v : undefined;
  if (typeof v === 'string' && /^\d{1,9}$/.test(v.trim())) return Number(v);
  return undefined;
}

const isObject = (v: unknown): v is Record<string, any> => !!v && typeof v === 'object' && !Array.isArray(v);

/** The objects of a body where a shape's fields live. */
const holders = (json: Record<string, any>, shape: Shape) =>
  shape.within ? shape.within.map((k) => json[k]).filter(isObject) : [json];

export interface OutputLimit {
  /** The largest limit the request sets in any field its API may honour; undefined when it sets none. */
  requested?: number;
  /** Answers generated at once (`n`, `best_of`, `candidateCount`): each may reach the limit. */
  choices: number;
  /** Berth knows the field bounding this API's output, so it can cap the call. */
  settable: boolean;
}

export function outputLimitOf(method: string, path: string, json: unknown): OutputLimit {
  const shape = shapeOf(method, path);
  if (!shape || !isObject(json)) return { choices: 1, settable: false };
  let requested: number | undefined;
  let choices = 1;
  for (const h of holders(json, shape)) {
    for (const f of shape.fields) {
      const n = count(h[f]);
      if (n !== undefined) requested = Math.max(requested ?? 0, n);
    }
    for (const f of shape.choices) choices = Math.max(choices, count(h[f]) ?? 1);
  }
  return { requested, choices, settable: true };
}

/**
 * The body with its output limit set to `limit` in the field `provider` honours on this API (through this
 * connection: Azure's API version decides), every other
 * spelling of it removed; undefined when the body already says exactly that (its bytes then go unchanged).
 */
export function withOutputLimit(
  method: string,
  path: string,
  json: Record<string, any>,
  provider: Provider,
  connection: Connection,
  limit: number,
): Record<string, any> | undefined {
  const shape = shapeOf(method, path);
  if (!shape) return undefined;
  const honoured = shape.chat
    ? (provider.chatLimitFields?.(connection) ?? ['max_tokens'])
    : [shape.fields[0]];
  // Which limit fields the body sets (counted without building a list: this runs on every capped call).
  let setCount = 0;
  let setField = '';
  let setValue: unknown;
  for (const h of holders(json, shape))
    for (const f of shape.fields)
      if (f in h) {
        setCount++;
        setField = f;
        setValue = h[f];
      }
  if (setCount === 1 && honoured.includes(setField) && setValue === limit) return undefined;
  const out = { ...json };
  let target: Record<string, any> = out;
  if (shape.within) {
    const key = shape.within.find((k) => isObject(json[k])) ?? shape.within[0];
    for (const k of shape.within) {
      if (!isObject(json[k])) continue;
      out[k] = { ...json[k] };
      for (const f of shape.fields) delete out[k][f];
    }
    out[key] ??= {};
    target = out[key];
  } else for (const f of shape.fields) delete out[f];
  target[honoured[0]] = limit;
  return out;
}
