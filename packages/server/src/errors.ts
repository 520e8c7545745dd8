// Every error that crosses the wire is declared here once; the problem+json shape of DESIGN.md §4
// (RFC 9457 plus `code` and `error`, which the service's own SDK reads) is rendered only here. This file is the
// bottom layer: it imports nothing of Berth's, so every layer may throw these. Internal errors (StoreError)
// are mapped to these only at the HTTP edges (http/wire-error.ts).

export const WIRE_ERRORS = {
  VALIDATION_FAILED: { status: 422, title: 'Validation failed' },
  MALFORMED_REQUEST: { status: 400, title: 'Malformed request' },
  UNAUTHENTICATED: { status: 401, title: 'Authentication required' },
  FORBIDDEN: { status: 403, title: 'Forbidden' },
  NOT_FOUND: { status: 404, title: 'Not found' },
  METHOD_NOT_ALLOWED: { status: 405, title: 'Method not allowed' },
  ALREADY_EXISTS: { status: 409, title: 'Already exists' },
  CONFLICT: { status: 409, title: 'Conflict' },
  INVALID_STATE: { status: 409, title: 'Invalid state' },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'Payload too large' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, title: 'Unsupported media type' },
  POLICY_DENIED: { status: 422, title: 'Denied by policy' },
  RATE_LIMITED: { status: 429, title: 'Rate limited' },
  QUOTA_EXCEEDED: { status: 429, title: 'Quota exceeded' },
  INTERNAL: { status: 500, title: 'Internal error' },
  NOT_IMPLEMENTED: { status: 501, title: 'Not implemented' },
  BAD_GATEWAY: { status: 502, title: 'Bad gateway' },
  UNAVAILABLE: { status: 503, title: 'Unavailable' },
  TIMEOUT: { status: 504, title: 'Timed out' },
} as const;

export type WireErrorName = keyof typeof WIRE_ERRORS;

/** One invalid field: `pointer` is a JSON pointer into the request body. */
export interface FieldIssue {
  pointer: string;
  message: string;
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: number;
  error: string;
  message: string;
  errors?: FieldIssue[];
  instance?: string;
}

/** An error meant for the client. Anything else that reaches the edge is rendered as INTERNAL. */
export class ApiError extends Error {
  readonly status: number;
  readonly title: string;
  readonly headers: Record<string, string>;

  constructor(
    readonly name: WireErrorName,
    readonly detail: string,
    readonly opts: {
      errors?: FieldIssue[];
      code?: string;
      headers?: Record<string, string>;
      status?: number;
    } = {},
  ) {
    super(detail);
    const def = WIRE_ERRORS[name];
    this.status = opts.status ?? def.status;
    this.title = def.title;
    this.headers = opts.headers ?? {};
  }

  /** The stable machine string: a kind-specific code (SANDBOX_ALREADY_EXISTS) or the registry name. */
  get error(): string {
    return this.opts.code ?? this.name;
  }

  toProblem(instance?: string): Problem {
    return {
      type: `https://berth.dev/problems/${this.error.toLowerCase().replaceAll('_', '-')}`,
      title: this.title,
      status: this.status,
      detail: this.detail,
      code: this.status,
      error: this.error,
      message: this.detail,
      ...(this.opts.errors?.length ? { errors: this.opts.errors } : {}),
      ...(instance ? { instance } : {}),
    };
  }
}

/**
 * The problem as the data plane (the gateway, at sandbox, preview and workload addresses) answers it: `error` holds
 * the message, as the sandbox API's own `{"error": "..."}` does and as the service's SDK builds its error message
 * from it ("Sandbox request failed with status 403 Forbidden: <error>"); the stable machine string is the last
 * segment of `type` (RFC 9457's identifier of a problem type). Decision 047.
 */
export function dataPlaneProblem(e: ApiError, instance?: string): Problem {
  return { ...e.toProblem(instance), error: e.detail };
}

export const notFound = (what: string) => new ApiError('NOT_FOUND', `${what} not found`);

/** `SandboxName` -> `SANDBOX_NAME`: the prefix of a kind's `<PREFIX>_ALREADY_EXISTS`. */
export const errorPrefixOf = (kind: string) =>
  kind
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/[^A-Za-z0-9]+/g, '_')
    .toUpperCase();

/** 409 for a name taken in its kind, with the kind-specific code the service's SDK matches on. */
export const alreadyExists = (kind: string, name: string) =>
  new ApiError('ALREADY_EXISTS', `${kind} ${JSON.stringify(name)} already exists`, {
    code: `${errorPrefixOf(kind)}_ALREADY_EXISTS`,
  });

export const invalid = (errors: FieldIssue[], detail?: string) =>
  new ApiError(
    'VALIDATION_FAILED',
    detail ?? errors.map((e) => `${e.pointer || '/'}: ${e.message}`).join('; '),
    {
      errors,
    },
  );
