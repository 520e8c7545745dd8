// Every request of the console: the public /v0 API and the data-plane addresses the SDK uses, with the session's
// key as Authorization and its workspace named. A failure is thrown as the API's own problem document.
import { getSession, type Session } from './session';

export interface Problem {
  title?: string;
  status?: number;
  detail?: string;
  error?: string;
  errors?: { pointer?: string; message: string }[];
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem,
  ) {
    super(problem.detail || problem.title || `HTTP ${status}`);
  }
}

export interface RequestOptions {
  body?: unknown;
  /** Sent as is (a file, bytes, a form) instead of JSON. */
  raw?: BodyInit;
  query?: Record<string, string | number | boolean | undefined>;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  session?: Session;
}

function headersOf(s: Session | null, extra: Record<string, string> = {}): Headers {
  const h = new Headers(extra);
  if (s) {
    h.set('authorization', `Bearer ${s.key}`);
    h.set('x-service-workspace', s.workspace);
  }
  return h;
}

function urlOf(path: string, query?: RequestOptions['query']) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `${path}${path.includes('?') ? '&' : '?'}${s}` : path;
}

async function problemOf(res: Response): Promise<Problem> {
  const text = await res.text().catch(() => '');
  try {
    const p = JSON.parse(text);
    if (p && typeof p === 'object') return p;
  } catch {}
  return { status: res.status, title: res.statusText, detail: text.slice(0, 500) || `HTTP ${res.status}` };
}

/** A request to any same-origin path; resolves to the Response when it is a success, else throws ApiError. */
export async function send(method: string, path: string, opts: RequestOptions = {}): Promise<Response> {
  const s = opts.session ?? getSession();
  const headers = headersOf(s, opts.headers);
  let body: BodyInit | undefined = opts.raw;
  if (opts.body !== undefined) {
    headers.set('content-type', 'application/json');
    body = JSON.stringify(opts.body);
  }
  const res = await fetch(urlOf(path, opts.query), { method, headers, body, signal: opts.signal });
  if (!res.ok) throw new ApiError(res.status, await problemOf(res));
  return res;
}

/** A /v0 call answering JSON (or nothing). */
export async function api<T = any>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
  const res = await send(method, `/v0${path}`, opts);
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

export const get = <T = any>(path: string, opts?: RequestOptions) => api<T>('GET', path, opts);

/** One page of a list, and the cursor of the next (X-Next-Cursor), if any. */
export async function listPage<T = any>(
  path: string,
  opts: { limit?: number; cursor?: string; signal?: AbortSignal } = {},
): Promise<{ items: T[]; next?: string }> {
  const res = await send('GET', `/v0${path}`, {
    query: { limit: opts.limit, cursor: opts.cursor },
    signal: opts.signal,
  });
  return { items: await res.json(), next: res.headers.get('x-next-cursor') ?? undefined };
}

/** The data-plane address of a sandbox (the path form, on this origin), as the SDK reaches its API. */
export function sandboxPath(name: string, rest = '') {
  const s = getSession();
  return `/run/${encodeURIComponent(s?.workspace ?? '')}/sandboxes/${encodeURIComponent(name)}${rest}`;
}

export function workloadPath(kind: 'agents' | 'functions', name: string, rest = '') {
  const s = getSession();
  return `/run/${encodeURIComponent(s?.workspace ?? '')}/${kind}/${encodeURIComponent(name)}${rest}`;
}

/** A call to a sandbox's own API (files, processes) through the gateway. */
export async function sandboxApi<T = any>(
  name: string,
  method: string,
  rest: string,
  opts: RequestOptions = {},
): Promise<T> {
  const res = await send(method, sandboxPath(name, rest), opts);
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

/** Reads a streamed text answer chunk by chunk until it ends or `signal` aborts. */
export async function followText(
  path: string,
  onText: (chunk: string) => void,
  opts: RequestOptions = {},
): Promise<void> {
  const res = await send('GET', path, opts);
  const reader = res.body?.getReader();
  if (!reader) return;
  const dec = new TextDecoder();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    onText(dec.decode(value, { stream: true }));
  }
}

export function errorText(err: unknown): string {
  if (err instanceof ApiError) return err.message;
  return err instanceof Error ? err.message : String(err);
}
