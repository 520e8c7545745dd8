// The model a call runs is the endpoint's own (spec.runtime.model), wherever the call names one: the body's
// `model`, a form field, the query, or the path (Gemini's `models/<m>:generateContent`, Azure's
// `deployments/<m>`). Naming the endpoint itself means its model; naming another model is refused before the
// provider is asked, so access to one endpoint is not access to every model its connection's key can reach
// (decision 039).
import type { IncomingHttpHeaders } from 'node:http';
import { ApiError } from '../errors.js';
import type { Endpoint } from './endpoints.js';

/** A model named in a path: Gemini's `…/models/<m>:<method>` (or tunedModels), Azure's `/openai/deployments/<m>/…`. */
const GEMINI_PATH = /^(.*\/)((?:models|tunedModels)\/[^/:]+)(:[^/]+)$/;
const AZURE_PATH = /^(\/openai\/deployments\/)([^/]+)(\/.*)?$/;

/**
 * APIs that run models named inside a stored file or in nested requests, later and out of the gateway's
 * sight: Berth could neither pin their model nor meter their tokens.
 */
const BATCH_PATHS = /\/(batches|batch\/jobs)$|:(batchGenerateContent|asyncBatchEmbedContent)$/;

/**
 * What makes a path read differently upstream than here: dot segments and backslashes (which URL parsing
 * resolves), control characters (which it drops), `%` left after decoding (a provider may decode twice).
 * `/models/x/../gemini-ultra:generateContent` would otherwise pass as no model path and reach one.
 */
const AMBIGUOUS_PATH = /(^|\/)\.\.?(\/|$)|[\\%\p{Cc}]/u;

/** Gemini's names may carry their collection (`models/gemini-2.5-pro`); the rest of a name is compared exactly. */
const bare = (m: string) => m.replace(/^models\//, '');

function refuse(ep: Endpoint, named: unknown, where: string): never {
  const shown = typeof named === 'string' ? named : named instanceof Blob ? 'a file' : JSON.stringify(named);
  throw new ApiError(
    'FORBIDDEN',
    ep.model === undefined
      ? `model endpoint ${ep.name} names no model (spec.runtime.model), so it serves only calls that name none; this call names ${shown} in its ${where}`
      : `model endpoint ${ep.name} serves ${ep.model} only; this call names ${shown} in its ${where}: name ${ep.model}, ${ep.name}, or no model`,
  );
}

/** What naming `named` means on this endpoint: its own model (`keep`), or the endpoint's name (`pin`). */
function judge(ep: Endpoint, named: unknown, where: string): 'keep' | 'pin' {
  if (named === ep.name) return 'pin';
  if (typeof named === 'string' && ep.model !== undefined && bare(named) === bare(ep.model)) return 'keep';
  return refuse(ep, named, where);
}

const absent = (v: unknown) => v === undefined || v === null || v === '';

export interface PinnedCall {
  /** The model the provider is asked for; undefined when the endpoint names none. */
  model?: string;
  path: string;
  query: string;
}

/**
 * The call's path and query with the endpoint's model in them, after judging every model the call names
 * outside a form body. The JSON body's `model` is judged here and written per connection by forward.ts.
 */
export function pinCall(
  ep: Endpoint,
  method: string,
  path: string,
  query: string,
  json: unknown,
): PinnedCall {
  if (AMBIGUOUS_PATH.test(path))
    throw new ApiError(
      'MALFORMED_REQUEST',
      'a model call’s path must not hold dot segments, backslashes, control characters or percent signs once decoded',
    );
  if (method !== 'GET' && method !== 'HEAD' && BATCH_PATHS.test(path))
    throw new ApiError(
      'FORBIDDEN',
      `${path} runs models named in stored files or nested requests, which a model endpoint can neither pin to ${ep.model ?? 'its model'} nor meter; call the endpoint once per request instead`,
    );
  if (json && typeof json === 'object' && !Array.isArray(json) && !absent((json as any).model))
    judge(ep, (json as any).model, 'body');
  return { model: ep.model, path: pinPath(ep, path), query: pinQuery(ep, query) };
}

function pinPath(ep: Endpoint, path: string): string {
  const gemini = GEMINI_PATH.exec(path);
  if (gemini) {
    if (judge(ep, bare(gemini[2]), 'path') === 'keep') return path;
    if (ep.model === undefined) refuse(ep, gemini[2], 'path');
    const target = /^(models|tunedModels)\//.test(ep.model!) ? ep.model! : `models/${ep.model}`;
    return `${gemini[1]}${target}${gemini[3]}`;
  }
  const azure = AZURE_PATH.exec(path);
  if (azure) {
    const named = decodeURIComponent(azure[2]);
    if (judge(ep, named, 'path') === 'keep') return path;
    if (ep.model === undefined) refuse(ep, named, 'path');
    return `${azure[1]}${encodeURIComponent(ep.model!)}${azure[3] ?? ''}`;
  }
  return path;
}

function pinQuery(ep: Endpoint, query: string): string {
  if (!query) return query;
  const params = new URLSearchParams(query);
  const named = params.getAll('model').filter((m) => !absent(m));
  if (!named.length) return query;
  if (named.map((m) => judge(ep, m, 'query')).every((v) => v === 'keep')) return query;
  params.delete('model');
  if (ep.model !== undefined) params.set('model', ep.model);
  return params.toString();
}

const FORM = /^\s*(multipart\/form-data|application\/x-www-form-urlencoded)\b/i;

/**
 * A form body's `model` fields judged (audio transcriptions, image edits). Returns the body and headers to
 * send when the form named the endpoint itself and was re-encoded with its model; undefined otherwise.
 */
export async function pinForm(
  ep: Endpoint,
  raw: Buffer,
  headers: IncomingHttpHeaders,
): Promise<{ raw: Buffer; headers: IncomingHttpHeaders } | undefined> {
  const type = String(headers['content-type'] ?? '');
  if (!FORM.test(type)) return undefined;
  let form: FormData;
  try {
    form = await new Response(new Uint8Array(raw), { headers: { 'content-type': type } }).formData();
  } catch (e) {
    throw new ApiError('MALFORMED_REQUEST', `form body cannot be read: ${(e as Error).message}`);
  }
  const named = form.getAll('model');
  if (!named.length) return undefined;
  if (named.map((m) => judge(ep, m, 'form')).every((v) => v === 'keep')) return undefined;
  form.delete('model');
  if (ep.model !== undefined) form.set('model', ep.model);
  if (/urlencoded/i.test(type))
    return { raw: Buffer.from(new URLSearchParams(form as any).toString()), headers };
  // A new multipart body has a new boundary, which its Content-Type must carry.
  const encoded = new Request('http://berth.invalid', { method: 'POST', body: form });
  return {
    raw: Buffer.from(await encoded.arrayBuffer()),
    headers: { ...headers, 'content-type': encoded.headers.get('content-type') ?? type },
  };
}
