// The typed Berth client: openapi-fetch over the types generated from the server's own OpenAPI
// document (schema.d.ts), so every path, body and answer is checked against what the server validates.
import createClient, { type Client } from 'openapi-fetch';
// `../src/` on purpose: tsc does not copy the generated schema.d.ts into dist, and this specifier
// resolves to the same file from src/index.ts and from the emitted dist/index.d.ts.
import type { components, operations, paths } from '../src/schema.js';

export type { components, operations, paths };
export { KINDS, type KindInfo, type KindParent, kindByName } from './kinds.js';
export type Schemas = components['schemas'];
export type Problem = components['schemas']['Problem'];
/** The media the client reads: JSON answers and problems. */
type JsonMedia = 'application/json' | 'application/problem+json';

/**
 * The JSON answers of every route: reads that also stream changes (`?watch=true`, `application/x-ndjson`) are typed by
 * the JSON they answer without it.
 */
export type BerthClient = Client<paths, JsonMedia>;

export interface BerthClientOptions {
  /** The server address, e.g. `http://127.0.0.1:8080`; `/v0` is added unless already there. */
  baseUrl: string;
  /** An API key, or a JWT from POST /v0/oauth/token. */
  apiKey: string;
  /** Workspace to act in; default: the credential's home workspace. */
  workspace?: string;
  fetch?: typeof globalThis.fetch;
}

/** `http://h:1/` and `http://h:1/v0` both become `http://h:1/v0`. */
export function apiBase(url: string) {
  const u = url.replace(/\/+$/, '');
  return u.endsWith('/v0') ? u : `${u}/v0`;
}

export function createBerthClient(opts: BerthClientOptions): BerthClient {
  const headers: Record<string, string> = { authorization: `Bearer ${opts.apiKey}` };
  if (opts.workspace) headers['x-service-workspace'] = opts.workspace;
  return createClient<paths, JsonMedia>({
    baseUrl: apiBase(opts.baseUrl),
    headers,
    ...(opts.fetch ? { fetch: opts.fetch } : {}),
  });
}

/** A failed call, carrying the server's problem document. */
export class BerthApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem | undefined,
  ) {
    super(problem?.detail ?? `HTTP ${status}`);
    this.name = 'BerthApiError';
  }
}

/** Resolves to the answer's data, or throws BerthApiError: `const p = await unwrap(client.GET(...))`. */
export async function unwrap<T>(
  call: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  const { data, error, response } = await call;
  if (!response.ok) throw new BerthApiError(response.status, error as Problem | undefined);
  return data as T;
}

/**
 * The items of a list answer: lists are bare arrays, or `{data, meta}` for a client that sends `Blaxel-Version`
 * 2026-04-28 or later (the document describes both, decision 019).
 */
export function itemsOf<T>(list: T[] | { data: T[] }): T[] {
  return Array.isArray(list) ? list : list.data;
}
