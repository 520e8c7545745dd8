// A small HTTP client for /v0 over fetch: the CLI works on any kind, so it builds paths from the kinds table
// (@berth/sdk's kinds.json, generated from the server's registry) at run time instead of using the SDK's per-path
// types, and never loads the server's code.
import { apiBase, KINDS, type KindInfo, kindByName } from '@berth/sdk';
import type { Command } from 'commander';
import type { CliConfig } from './config.js';
import { type HeaderMap, type RawAnswer, send } from './http.js';

/**
 * The message of a problem for a terminal: a heading, then one line per invalid field. The server's detail of a
 * validation failure already lists every field, so when it names each of them the title heads the list instead
 * (printing both showed every field twice).
 */
export function problemMessage(status: number, problem: any): string {
  const detail: string = problem?.detail ?? problem?.message ?? `HTTP ${status}`;
  const errors: { pointer?: string; message?: string }[] = Array.isArray(problem?.errors)
    ? problem.errors
    : [];
  if (!errors.length) return detail;
  const named = errors.every((e) => detail.includes(e.pointer || '/'));
  const heading = named ? (problem?.title ?? `HTTP ${status}`) : detail;
  return `${heading}${errors.map((e) => `\n  ${e.pointer || '/'}: ${e.message}`).join('')}`;
}

/** A failed call, its message already shaped for a terminal (see problemMessage). */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly problem: any,
  ) {
    super(problemMessage(status, problem));
  }
}

/** `warnings` of a create or replace (unknown fields the server dropped), one line each for stderr. */
export function warningLines(label: string, body: any): string {
  const ws: { pointer?: string; message?: string }[] = Array.isArray(body?.warnings) ? body.warnings : [];
  return ws.map((w) => `warning: ${label}: ${w.pointer || '/'}: ${w.message}\n`).join('');
}

export interface Answer {
  body: any;
  headers: HeaderMap;
  status: number;
  /** The body as sent (plain-text answers such as logs). */
  text: string;
}

export class Api {
  private readonly base: string;
  constructor(private readonly cfg: CliConfig) {
    this.base = apiBase(cfg.url);
  }

  async call(
    method: string,
    path: string,
    opts: { body?: unknown; query?: Record<string, string>; raw?: { body: Blob; type: string } } = {},
  ): Promise<Answer> {
    const url = new URL(this.base + path);
    for (const [k, v] of Object.entries(opts.query ?? {})) url.searchParams.set(k, v);
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.cfg.apiKey}`,
      accept: 'application/json',
    };
    if (this.cfg.workspace) headers['x-service-workspace'] = this.cfg.workspace;
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    if (opts.raw) headers['content-type'] = opts.raw.type;
    let res: RawAnswer;
    try {
      res = await send(
        url,
        method,
        headers,
        opts.raw ? opts.raw.body : opts.body === undefined ? undefined : JSON.stringify(opts.body),
      );
    } catch (e) {
      throw new Error(`cannot reach ${this.base}: ${(e as Error).message}`);
    }
    const { text, status } = res;
    let body: any;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    if (status < 200 || status > 299)
      throw new ApiFailure(status, body ?? { detail: `HTTP ${status}: ${text.slice(0, 200)}` });
    return { body, headers: res.headers, status, text };
  }
}

/** A streamed GET (followed logs, a watch): the response once its status is known; failures as `call` reports them. */
export async function openStream(
  cfg: CliConfig,
  path: string,
  query: Record<string, string> = {},
  signal?: AbortSignal,
) {
  const url = new URL(apiBase(cfg.url) + path);
  for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
  const headers: Record<string, string> = { authorization: `Bearer ${cfg.apiKey}` };
  if (cfg.workspace) headers['x-service-workspace'] = cfg.workspace;
  let res: Response;
  try {
    res = await fetch(url, { headers, signal });
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    throw new Error(
      `cannot reach ${apiBase(cfg.url)}: ${(e as Error & { cause?: Error }).cause?.message ?? (e as Error).message}`,
    );
  }
  if (!res.ok) {
    const text = await res.text();
    let body: any;
    try {
      body = JSON.parse(text);
    } catch {
      body = { detail: `HTTP ${res.status}: ${text.slice(0, 200)}` };
    }
    throw new ApiFailure(res.status, body);
  }
  return res;
}

export interface WatchEvent {
  /** SYNCED: the ADDED events before it were the state when the watch began; what follows are changes. */
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'SYNCED';
  object?: any;
}

/**
 * The changes of a kind's list or of one object (`?watch=true`, api/watch.ts): its current state as ADDED events and
 * a SYNCED mark, then one event per change, until `signal` aborts or the server ends the stream (the object was
 * removed).
 */
export async function* watch(
  cfg: CliConfig,
  path: string,
  query: Record<string, string> = {},
  signal?: AbortSignal,
): AsyncGenerator<WatchEvent> {
  const res = await openStream(cfg, path, { ...query, watch: 'true' }, signal);
  if (!(res.headers.get('content-type') ?? '').includes('ndjson'))
    throw new Error('this server does not stream changes (it is older than this CLI): upgrade it');
  const dec = new TextDecoder();
  let held = '';
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      held += dec.decode(chunk, { stream: true });
      let nl = held.indexOf('\n');
      while (nl >= 0) {
        const line = held.slice(0, nl);
        held = held.slice(nl + 1);
        nl = held.indexOf('\n');
        if (!line.trim()) continue;
        const e = JSON.parse(line);
        if (e.type !== 'PING') yield e as WatchEvent;
      }
    }
  } catch (e) {
    if ((e as Error).name !== 'AbortError') throw e;
  }
}

/** Page size the CLI asks for while following cursors (the server allows up to 1000). */
export const PAGE = 500;

/** Every object of a collection, following the X-Next-Cursor of each page. */
export async function listAll(api: Api, path: string, query: Record<string, string> = {}): Promise<any[]> {
  const items: any[] = [];
  let cursor: string | null = null;
  do {
    const { body, headers } = await api.call('GET', path, {
      query: { ...query, limit: String(PAGE), ...(cursor ? { cursor } : {}) },
    });
    items.push(...(Array.isArray(body) ? body : []));
    cursor = headers.get('x-next-cursor');
  } while (cursor);
  return items;
}

/** `sandboxName` -> `sandbox`: the flag that names a parent object (`--sandbox`, `--vpc`, `--gateway`). */
export const parentFlag = (param: string) =>
  param
    .replace(/Name$/, '')
    .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
    .toLowerCase();

/** commander's attribute name of a flag (`--egress-gateway` -> `egressGateway`). */
const optionKey = (flag: string) => flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

/**
 * The collection path of a kind with its parents filled in: from the flags first, then from the
 * document's own metadata fields (such as `vpcName`).
 */
export function collectionPath(
  kd: KindInfo,
  flags: Record<string, unknown>,
  metadata: Record<string, unknown> = {},
) {
  let path = kd.path;
  for (const p of kd.parents) {
    const flag = parentFlag(p.param);
    const v = flags[optionKey(flag)] ?? metadata[p.metadataField];
    if (typeof v !== 'string' || !v)
      throw new Error(
        `${kd.plural} live inside ${/^[AEIOU]/.test(p.kind) ? 'an' : 'a'} ${p.kind}: pass --${flag} <name>`,
      );
    path = path.replace(`{${p.param}}`, encodeURIComponent(v));
  }
  return path;
}

export const itemPath = (collection: string, name: string) => `${collection}/${encodeURIComponent(name)}`;

/** A kind by plural, singular or alias (`policies`, `policy`, `pol`, `Policy`). */
export function resolveKind(name: string): KindInfo {
  const kd = kindByName(name);
  if (!kd)
    throw new Error(`unknown kind ${JSON.stringify(name)}; known: ${KINDS.map((k) => k.plural).join(', ')}`);
  return kd;
}

/** Adds `--sandbox`, `--vpc`, `--gateway` and any other parent flag a kind needs. */
export function addParentFlags(cmd: Command) {
  const flags = new Set(['sandbox', 'vpc', 'gateway']);
  for (const kd of KINDS) for (const p of kd.parents) flags.add(parentFlag(p.param));
  for (const f of flags) cmd.option(`--${f} <name>`, `the ${f} a nested kind lives in`);
  return cmd;
}
